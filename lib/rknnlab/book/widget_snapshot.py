"""A static picture of an ipywidgets form, for pages that cannot run widgets.

A static page (the book, an export) has no widget manager: that would come from a CDN. When
a notebook is executed for the book, nbclient records every widget's state (its value, its
options, its children) in the notebook's metadata; :func:`add_snapshots` turns each
displayed widget into plain HTML drawn from that state (a disabled drop-down showing the
chosen model, ticked check boxes, the slider's value, a full progress bar...) and adds it to
the output as ``text/html``, which the page then shows instead of the widget's Python repr.

Output widgets are left empty: what a widget draws for the static page goes to ordinary cell
outputs (see rknnlab.widgets.RunnerPanel.run), and showing it twice would be noise.
"""
from __future__ import annotations

import html
from typing import Any, Dict

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SNAPSHOT_CLASS = "rknnlab-widget-snapshot"

_BOXES = {"VBoxModel": "column", "HBoxModel": "row", "BoxModel": "row", "GridBoxModel": "row"}


def add_snapshots(nb) -> int:
    """Add a ``text/html`` snapshot to every widget output of ``nb`` whose state was stored;
    returns how many. The widget state stays in the metadata (the caller may drop it)."""
    states = (nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}) or {}).get("state", {})
    n = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            view = data.get(WIDGET_VIEW)
            if not view or "text/html" in data:
                continue
            model_id = view.get("model_id")
            if model_id in states:
                data["text/html"] = (f'<div class="{SNAPSHOT_CLASS}">'
                                     f'{_render(model_id, states, depth=0)}</div>')
                n += 1
    return n


def _label(text: str) -> str:
    return f'<span class="rknnlab-w-label">{html.escape(text)}</span> ' if text else ""


def _render(model_id: str, states: Dict[str, Any], depth: int) -> str:
    model = states.get(model_id)
    if model is None or depth > 20:
        return ""
    name, s = model.get("model_name", ""), model.get("state", {})
    desc = str(s.get("description", "") or "")
    if name in _BOXES:
        kids = "".join(_render(str(c).replace("IPY_MODEL_", ""), states, depth + 1)
                       for c in s.get("children", []))
        direction = _BOXES[name]
        align = "flex-start" if direction == "column" else "center"
        return (f'<div class="rknnlab-w-box" style="display:flex;flex-direction:{direction};'
                f'flex-wrap:wrap;gap:0.3em 1em;align-items:{align}">{kids}</div>')
    if name in ("DropdownModel", "SelectModel", "RadioButtonsModel", "ToggleButtonsModel"):
        labels = s.get("_options_labels", [])
        index = s.get("index")
        chosen = labels[index] if isinstance(index, int) and 0 <= index < len(labels) else ""
        return (f'<span>{_label(desc)}<select disabled><option selected>{html.escape(str(chosen))}'
                '</option></select></span>')
    if name in ("CheckboxModel", "ToggleButtonModel"):
        checked = " checked" if s.get("value") else ""
        return f'<label><input type="checkbox" disabled{checked}> {html.escape(desc)}</label>'
    if name in ("IntSliderModel", "FloatSliderModel", "IntTextModel", "FloatTextModel",
                "BoundedIntTextModel", "BoundedFloatTextModel"):
        value = s.get("value", "")
        bar = ""
        if "Slider" in name:
            bar = (f'<input type="range" disabled min="{html.escape(str(s.get("min", 0)))}" '
                   f'max="{html.escape(str(s.get("max", 100)))}" value="{html.escape(str(value))}"> ')
        return f'<span>{_label(desc)}{bar}<strong>{html.escape(str(value))}</strong></span>'
    if name == "ButtonModel":
        return f'<button type="button" disabled>{html.escape(desc)}</button>'
    if name in ("IntProgressModel", "FloatProgressModel"):
        return (f'<span>{_label(desc)}<progress value="{html.escape(str(s.get("value", 0)))}" '
                f'max="{html.escape(str(s.get("max", 100)))}"></progress></span>')
    if name in ("HTMLModel", "HTMLMathModel"):
        # the notebook's own HTML (a status line it wrote), as the live widget shows it
        return f'<span>{_label(desc)}{s.get("value", "")}</span>'
    if name in ("LabelModel", "TextModel", "TextareaModel"):
        return f'<span>{_label(desc)}{html.escape(str(s.get("value", "")))}</span>'
    return ""                               # Output widgets and anything else: nothing
