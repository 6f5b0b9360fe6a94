"""A font for the Chinese text in figures (the zh edition), chosen explicitly.

Matplotlib's default font (DejaVu Sans) has no Chinese glyphs: a Chinese title would come out as
empty boxes.  :func:`use_cjk` keeps DejaVu Sans first (Latin text, digits and units look as in
the English edition) and names a CJK font as the fallback for the glyphs DejaVu lacks
(matplotlib >= 3.6 falls back glyph by glyph along ``font.family``).

The font: Noto Sans CJK (Debian and Ubuntu: ``sudo apt install fonts-noto-cjk``; the course's CI
installs it), else another Simplified Chinese font that is often installed.  Matplotlib >= 3.10
reads every face of Noto's .ttc collection and gets the Simplified Chinese one; older releases
read only its first face, "Noto Sans CJK JP", whose glyphs draw a few hanzi in their Japanese form.
A font installed after matplotlib built its font cache is found too (the known folders are
scanned).  Without any, :func:`use_cjk` warns once, with the command that installs one.
"""
from __future__ import annotations

import glob
import os
import warnings
from typing import List, Optional

#: Simplified Chinese first; the JP face last (what matplotlib < 3.10 makes of Noto's .ttc)
CJK_FAMILIES = ("Noto Sans CJK SC", "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Micro Hei",
                "WenQuanYi Zen Hei", "Droid Sans Fallback", "Noto Sans CJK JP")
#: where Linux distributions put them (a font installed after matplotlib's cache was built)
FONT_GLOBS = ("/usr/share/fonts/opentype/noto/NotoSansCJK*.tt[cf]", "/usr/share/fonts/opentype/noto/NotoSansCJK*.otf",
              "/usr/share/fonts/noto-cjk/NotoSansCJK*.tt[cf]", "/usr/share/fonts/google-noto-cjk/NotoSansCJK*.tt[cf]",
              "/usr/share/fonts/truetype/wqy/*.tt[cf]", "/usr/share/fonts/wqy-microhei/*.tt[cf]",
              "~/.local/share/fonts/*CJK*.tt[cf]", "~/.local/share/fonts/*CJK*.otf")
INSTALL_HINT = "sudo apt install fonts-noto-cjk"

_warned = False


def _known_families() -> List[str]:
    from matplotlib import font_manager
    return [f.name for f in font_manager.fontManager.ttflist]


def cjk_family() -> Optional[str]:
    """The CJK font family matplotlib can use here (see :data:`CJK_FAMILIES`), or None."""
    from matplotlib import font_manager
    names = set(_known_families())
    if not names & set(CJK_FAMILIES):
        for pattern in FONT_GLOBS:
            for path in sorted(glob.glob(os.path.expanduser(pattern))):
                try:
                    font_manager.fontManager.addfont(path)
                except (OSError, RuntimeError, ValueError):   # an unreadable file: try the next
                    continue
        names = set(_known_families())
    return next((f for f in CJK_FAMILIES if f in names), None)


def use_cjk() -> Optional[str]:
    """Make matplotlib draw Chinese text: ``font.family`` becomes [its first family, the CJK
    font].  Returns the CJK family, or None (after one warning) when this machine has none."""
    global _warned
    import matplotlib
    family = cjk_family()
    if family is None:
        if not _warned:
            warnings.warn(f"no Chinese font found for the figures: their Chinese text would show as "
                          f"empty boxes. Install one ({INSTALL_HINT}), then restart the kernel.",
                          stacklevel=2)
            _warned = True
        return None
    current = matplotlib.rcParams["font.family"]
    current = [current] if isinstance(current, str) else list(current)
    first = [f for f in current if f not in CJK_FAMILIES][:1] or ["sans-serif"]
    matplotlib.rcParams["font.family"] = first + [family]
    return family
