"""The step of ``nbgrader autograde`` that runs a submission: nbgrader's own Execute,
with the grader of :mod:`.grading` in front.

The exported course's ``nbgrader_config.py`` puts :class:`GradeInFreshKernel` where
nbgrader's ``Execute`` is in ``Autograde.autograde_preprocessors``. For one notebook it

1. adds a first cell that makes the grader (:func:`rknnlab.classroom.grading.grader`) under
   a name drawn at random for this run, before any cell of the student's runs;
2. turns each graded cell of ours, ``checks.check_x(ARGS).require()``, into a call of that
   grader with the same ARGS (the student's functions, as the notebook defined them);
3. executes the notebook in a fresh kernel (nbgrader's Execute) whose working folder is a new,
   empty one: a file handed in beside the notebook (a module named ``rknnlab``, say) is not
   importable there, and the first cell refuses an rknnlab that is not the one installed;
4. puts the graded cells' sources back and takes the first cell out: the feedback shows the
   notebook as the student wrote it, with the grader's output under each graded cell;
5. logs a warning, for the instructor, when an answer cell looks into the interpreter's own
   frames or objects (``sys._getframe``, ``f_locals``, ``gc.get_objects``...): a check calls the
   student's function from its own frame, which such code can read.

A graded cell of another form (an instructor's own test) runs as written.
"""
from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
import tempfile
from typing import Any, List, Optional, Tuple

import nbformat
from nbgrader.preprocessors import Execute

from .nbgrader_export import is_check, only_expression

#: a graded cell's grade_id, as the export names it: "<lab>-<check function>"
GRADE_ID = re.compile(r"^(lab\d+)-(check_\w+)$")
#: code that reads the interpreter's frames or objects: an answer has no use for it, a check's
#: expected values can be read with it
INTROSPECTION = re.compile(r"\b(_getframe|currentframe|_current_frames|f_back|f_locals|f_globals|"
                           r"gc\.get_(objects|referrers|referents)|tb_frame|settrace|setprofile)\b")


def graded_call(source: str) -> Optional[Tuple[str, str]]:
    """(check name, the source of its arguments) for a cell that is exactly
    ``checks.check_x(ARGS).require()``; None for any other cell."""
    outer = only_expression(source)
    if not (isinstance(outer, ast.Call) and not outer.args and not outer.keywords
            and isinstance(outer.func, ast.Attribute) and outer.func.attr == "require"
            and is_check(outer.func.value)):
        return None
    call = outer.func.value
    parts = [ast.get_source_segment(source, a) for a in call.args]
    parts += [f"{k.arg}={ast.get_source_segment(source, k.value)}" if k.arg
              else f"**{ast.get_source_segment(source, k.value)}" for k in call.keywords]
    return call.func.attr, ", ".join(p or "" for p in parts)


class GradeInFreshKernel(Execute):
    """nbgrader's Execute, grading each of our graded cells with the grader made before
    the student's first cell (see the module's docstring)."""

    def preprocess(self, nb: nbformat.NotebookNode, resources: Any, km: Any = None) -> Any:
        name = f"_rknnlab_grade_{secrets.token_hex(8)}"
        originals: List[Tuple[Any, str]] = []
        labs = set()
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            found = GRADE_ID.match(str(meta.get("grade_id", "")))
            call = graded_call(cell.source) if cell.cell_type == "code" else None
            if not (meta.get("grade") and not meta.get("solution") and found and call
                    and call[0] == found.group(2)):
                continue
            labs.add(found.group(1))
            originals.append((cell, cell.source))
            cell.source = f"{name}({call[0]!r}{', ' if call[1] else ''}{call[1]})"
        if len(labs) > 1:
            raise ValueError(f"graded cells of several labs in one notebook: {sorted(labs)}")
        if not labs:
            return super().preprocess(nb, resources, km)
        lab = labs.pop()
        import rknnlab
        installed = os.path.realpath(rknnlab.__file__)
        first = nbformat.v4.new_code_cell(
            "import os as _rknnlab_os\nimport rknnlab as _rknnlab\n"
            f"if _rknnlab_os.path.realpath(_rknnlab.__file__) != {installed!r}:\n"
            "    raise ImportError(f'rknnlab here is {_rknnlab.__file__}, not the one installed: not graded')\n"
            "import rknnlab.classroom.grading as _rknnlab_grading\n"
            f"{name} = _rknnlab_grading.grader('rknnlab.checks.{lab}')\n"
            "del _rknnlab_grading, _rknnlab, _rknnlab_os")
        nb.cells.insert(0, first)
        metadata = resources.setdefault("metadata", {})
        folder, metadata["path"] = metadata.get("path"), tempfile.mkdtemp(prefix="rknnlab-grade-")
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            shutil.rmtree(metadata["path"], ignore_errors=True)
            metadata["path"] = folder
            nb.cells[:] = [c for c in nb.cells if c is not first]
            for cell, source in originals:
                cell.source = source
        if any(o.get("output_type") == "error" for o in first.get("outputs", [])):
            self.log.error("the grader could not be made (every graded cell fails): %s",
                           "".join(o.get("evalue", "") for o in first.outputs))
        looks = sorted({m.group(1) for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("solution")
                        for m in INTROSPECTION.finditer(cell.source)})
        if looks:
            self.log.warning("%s: an answer cell uses %s (it can read what a check expects): read it "
                             "before you trust this notebook's grade", metadata.get("name", "a notebook"),
                             ", ".join(looks))
        return nb, resources
