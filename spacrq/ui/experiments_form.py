"""The configuration form an experiment's manifest describes.

The module says what it takes — ``{group: [parameter, ...]}``, each parameter
with its type name, unit, bounds, options, description and whether it is
read-only — and the form is built from that alone, so spacrq holds no
per-experiment code.  Values the module would refuse are refused here, at
entry: a spin box cannot be typed past its bounds, a choice can only be one of
its options, and a document field that does not parse is marked and named
before anything is created from it.

Type names arrive as text (``"float"``, ``"int | None"``, ``"yaml"``); an
optional type (``| None``) gets an editor that may be left empty.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

#: the group an ungrouped key belongs to (plesty-lib's name for it)
DEFAULT_GROUP = "default"
INT_LIMIT = 2**31 - 1
FLOAT_LIMIT = 1e15


class FormError(ValueError):
    """A value in the form cannot be used; the message names the field and the fix."""


@dataclass(frozen=True)
class Parameter:
    """One configuration key as the manifest declares it."""

    group: str
    name: str
    kind: str  # int | float | bool | choice | text | document
    optional: bool
    default: Any
    unit: str
    minimum: float | None
    maximum: float | None
    options: tuple
    description: str
    read_only: bool

    @property
    def key(self) -> str:
        return self.name if self.group == DEFAULT_GROUP else f"{self.group}.{self.name}"


def _kind(dtype: Any, options: Any) -> tuple[str, bool]:
    """The editor a declared type name needs, and whether it may be left empty."""
    members = [m.strip().lower() for m in str(dtype or "Any").split("|")]
    optional = "none" in members or "nonetype" in members
    members = [m for m in members if m not in ("none", "nonetype")] or ["any"]
    if options:
        return "choice", optional
    if len(members) == 1:
        name = members[0]
        if name in ("int", "integer"):
            return "int", optional
        if name in ("float", "double", "number"):
            return "float", optional
        if name in ("bool", "boolean"):
            return "bool", optional
        if name in ("str", "string", "path"):
            return "text", optional
    return "document", optional


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def parameters_of(manifest: Mapping[str, Any]) -> list[Parameter]:
    """Every declared parameter of a manifest document, groups in order.

    :raises FormError: when the schema is not the ``{group: [parameter]}`` shape.
    """
    schema = manifest.get("schema") or {}
    if not isinstance(schema, Mapping):
        raise FormError("the module's manifest has a schema that is not a mapping of groups; "
                        "fix the module's manifest")
    out: list[Parameter] = []
    for group, entries in schema.items():
        if not isinstance(entries, (list, tuple)):
            raise FormError(f"the manifest's group {group!r} is not a list of parameters; "
                            "fix the module's manifest")
        for entry in entries:
            if not isinstance(entry, Mapping) or not entry.get("name"):
                raise FormError(f"the manifest's group {group!r} holds a parameter without a "
                                "name; fix the module's manifest")
            options = entry.get("options")
            options = tuple(options) if isinstance(options, (list, tuple)) else ()
            kind, optional = _kind(entry.get("dtype"), options)
            out.append(Parameter(
                group=str(group), name=str(entry["name"]), kind=kind, optional=optional,
                default=entry.get("default", entry.get("value")),
                unit=str(entry.get("unit") or ""),
                minimum=_number(entry.get("min_value")), maximum=_number(entry.get("max_value")),
                options=options, description=str(entry.get("description") or ""),
                read_only=bool(entry.get("read_only", False)),
            ))
    return out


class _FloatBox(QDoubleSpinBox):
    """A float spin box that shows 0.25 rather than 0.250000."""

    def textFromValue(self, value: float) -> str:  # noqa: N802 (Qt naming)
        return f"{value:.10g}"


def _parse_document(text: str) -> Any:
    """A document field's value: YAML when available (JSON is YAML too)."""
    try:
        import yaml  # optional: plesty-lib modules carry it, spacrq does not need it
    except ImportError:
        return json.loads(text)
    return yaml.safe_load(text)


class ParameterEditor(QWidget):
    """One field: the right editor for the parameter, and its value back."""

    changed = Signal()

    def __init__(self, parameter: Parameter, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.parameter = p = parameter
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.editor = self._build(p)
        self.editor.setObjectName(f"field:{p.key}")
        tip = p.description + (f" [{p.unit}]" if p.unit else "")
        if p.minimum is not None or p.maximum is not None:
            low = "−∞" if p.minimum is None else f"{p.minimum:g}"
            high = "∞" if p.maximum is None else f"{p.maximum:g}"
            tip += f"\nallowed: {low} … {high}"
        self.editor.setToolTip(tip.strip())
        self.editor.setEnabled(not p.read_only)
        self.editor.setMinimumWidth(150)
        policy = self.editor.sizePolicy()
        policy.setHorizontalPolicy(policy.Policy.Expanding)
        self.editor.setSizePolicy(policy)
        layout.addWidget(self.editor)

    def _build(self, p: Parameter) -> QWidget:
        default = p.default
        if p.kind == "int":
            box = QSpinBox()
            low = int(max(-INT_LIMIT, p.minimum if p.minimum is not None else -INT_LIMIT))
            high = int(min(INT_LIMIT, p.maximum if p.maximum is not None else INT_LIMIT))
            box.setRange(low, high)
            if p.unit:
                box.setSuffix(f" {p.unit}")
            box.setValue(int(_number(default) if _number(default) is not None else max(low, 0)))
            box.valueChanged.connect(self.changed)
            return box
        if p.kind == "float":
            box = _FloatBox()
            box.setDecimals(10)
            low = p.minimum if p.minimum is not None else -FLOAT_LIMIT
            high = p.maximum if p.maximum is not None else FLOAT_LIMIT
            box.setRange(low, high)
            box.setSingleStep(_step_for(low, high, default))
            if p.unit:
                box.setSuffix(f" {p.unit}")
            start = _number(default)
            box.setValue(start if start is not None else max(low, min(high, 0.0)))
            box.valueChanged.connect(self.changed)
            return box
        if p.kind == "bool":
            box = QCheckBox(p.unit)
            box.setChecked(bool(default))
            box.toggled.connect(self.changed)
            return box
        if p.kind == "choice":
            box = QComboBox()
            for option in p.options:
                box.addItem(str(option), option)
            index = p.options.index(default) if default in p.options else 0
            box.setCurrentIndex(index)
            box.currentIndexChanged.connect(self.changed)
            return box
        if p.kind == "text":
            box = QLineEdit("" if default is None else str(default))
            box.setPlaceholderText(p.unit or ("optional" if p.optional else ""))
            box.textChanged.connect(self.changed)
            return box
        box = QPlainTextEdit("" if default is None else _document_text(default))
        box.setTabChangesFocus(True)
        box.setFixedHeight(box.fontMetrics().lineSpacing() * 4 + 12)
        box.textChanged.connect(self._check_document)
        box.textChanged.connect(self.changed)
        return box

    def _check_document(self) -> None:
        try:
            self.value()
            self.editor.setStyleSheet("")
        except FormError as exc:
            self.editor.setStyleSheet("QPlainTextEdit { border: 1px solid #c0392b; }")
            self.editor.setToolTip(str(exc))

    def set_value(self, value: Any) -> None:
        """Show ``value`` (e.g. a run's own configuration) in the editor."""
        e, p = self.editor, self.parameter
        if p.kind in ("int", "float") and _number(value) is not None:
            e.setValue(int(value) if p.kind == "int" else float(value))
        elif p.kind == "bool":
            e.setChecked(bool(value))
        elif p.kind == "choice" and value in p.options:
            e.setCurrentIndex(p.options.index(value))
        elif p.kind == "text":
            e.setText("" if value is None else str(value))
        elif p.kind == "document":
            e.setPlainText("" if value is None else _document_text(value))

    def value(self) -> Any:
        """The field's value, typed as declared.

        :raises FormError: naming the field when it holds something unusable.
        """
        e, p = self.editor, self.parameter
        if p.kind == "int":
            return int(e.value())
        if p.kind == "float":
            return float(e.value())
        if p.kind == "bool":
            return bool(e.isChecked())
        if p.kind == "choice":
            return e.currentData()
        if p.kind == "text":
            text = e.text()
            return None if (p.optional and not text) else text
        text = e.toPlainText()
        if not text.strip():
            return None
        try:
            return _parse_document(text)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FormError(f"{p.key} is not a readable document ({first}); "
                            "write it as YAML or JSON") from None


def _step_for(low: float, high: float, default: Any) -> float:
    """A spin step that moves a value by a sensible fraction of its scale."""
    span = high - low if high - low < FLOAT_LIMIT else abs(_number(default) or 1.0) * 10
    if span <= 0:
        return 1.0
    return float(10 ** math.floor(math.log10(span / 10))) if span >= 1e-12 else 1e-12


def _document_text(value: Any) -> str:
    try:
        import yaml
    except ImportError:
        return json.dumps(value, indent=2)
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=None).strip()


class ConfigForm(QWidget):
    """The whole form: one box per group, one row per parameter.

    ``config()`` returns the values shaped like the module's configuration
    file (groups as nested mappings, ungrouped keys at the top level), which
    is what a run's ``config.yaml`` holds.
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.editors: dict[str, ParameterEditor] = {}
        self._placeholder = QLabel("Choose an experiment to see what it takes.")
        self._placeholder.setWordWrap(True)
        self._layout.addWidget(self._placeholder)
        self._layout.addStretch(1)

    def clear(self, message: str = "") -> None:
        while self._layout.count():
            item = self._layout.takeAt(0)
            if item.widget() is not None and item.widget() is not self._placeholder:
                item.widget().deleteLater()
        self.editors = {}
        self._placeholder.setText(message)
        self._layout.addWidget(self._placeholder)
        self._placeholder.setVisible(bool(message))
        self._layout.addStretch(1)

    def build(self, manifest: Mapping[str, Any]) -> None:
        """Replace the form with the fields ``manifest`` declares.

        :raises FormError: when the manifest's schema is malformed.
        """
        parameters = parameters_of(manifest)
        self.clear("" if parameters else "This experiment takes no configuration.")
        self._layout.takeAt(self._layout.count() - 1)  # the stretch goes last again
        boxes: dict[str, QFormLayout] = {}
        for p in parameters:
            form = boxes.get(p.group)
            if form is None:
                box = QGroupBox("General" if p.group == DEFAULT_GROUP else p.group)
                form = QFormLayout(box)
                form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
                boxes[p.group] = form
                self._layout.addWidget(box)
            editor = ParameterEditor(p)
            editor.changed.connect(self.changed)
            label = QLabel(p.name + (" 🔒" if p.read_only else ""))
            label.setToolTip(p.description)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
            form.addRow(label, editor)
            self.editors[p.key] = editor
        self._layout.addStretch(1)

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Fill the fields from a configuration document (unknown keys ignored)."""
        for key, editor in self.editors.items():
            group, name = editor.parameter.group, editor.parameter.name
            source = config if group == DEFAULT_GROUP else config.get(group)
            if isinstance(source, Mapping) and name in source:
                editor.set_value(source[name])

    def config(self) -> dict[str, Any]:
        """The configuration the form describes.

        :raises FormError: for the first field holding an unusable value.
        """
        out: dict[str, Any] = {}
        for editor in self.editors.values():
            p = editor.parameter
            value = editor.value()
            if value is None and p.default is None:
                continue  # an absent key takes the module's own default
            if p.group == DEFAULT_GROUP:
                out[p.name] = value
            else:
                out.setdefault(p.group, {})[p.name] = value
        return out
