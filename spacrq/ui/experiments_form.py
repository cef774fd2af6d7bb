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

Below the configuration the form offers what else the manifest declares
about a run: the module's own command-line ``options`` (each passed only when
ticked, typed as declared), the devices of its ``setup.yaml`` a run uses when
the module ``chooses_devices``, and the ``environment`` variables it reads —
a required one the run would not get shown in red with where to set it.  The
form reads nothing itself: the manifest, the device list and the environment
check arrive from the pane's watch.  What the manifest declares is read into plain
values, and every decision about it taken, in :mod:`spacrq.experiments.form_model`;
this module holds the widgets.
"""
from __future__ import annotations

import html
from typing import Any, Mapping

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from spacrq.experiments.form_model import (DEFAULT_GROUP, FLOAT_LIMIT, INT_LIMIT, FormError,
                                          Option, Parameter, document_text, environment_text,
                                          finite_number, options_of, parameters_of, step_for)
from spacrq.runfiles import RunFileError, parse_document

class _FloatBox(QDoubleSpinBox):
    """A float spin box that shows 0.25 rather than 0.250000."""

    def textFromValue(self, value: float) -> str:  # noqa: N802 (Qt naming)
        return f"{value:.10g}"


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
            box.setValue(int(finite_number(default) if finite_number(default) is not None else max(low, 0)))
            box.valueChanged.connect(self.changed)
            return box
        if p.kind == "float":
            box = _FloatBox()
            box.setDecimals(10)
            low = p.minimum if p.minimum is not None else -FLOAT_LIMIT
            high = p.maximum if p.maximum is not None else FLOAT_LIMIT
            box.setRange(low, high)
            box.setSingleStep(step_for(low, high, default))
            if p.unit:
                box.setSuffix(f" {p.unit}")
            start = finite_number(default)
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
        box = QPlainTextEdit("" if default is None else document_text(default))
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
        if p.kind in ("int", "float") and finite_number(value) is not None:
            e.setValue(int(value) if p.kind == "int" else float(value))
        elif p.kind == "bool":
            e.setChecked(bool(value))
        elif p.kind == "choice" and value in p.options:
            e.setCurrentIndex(p.options.index(value))
        elif p.kind == "text":
            e.setText("" if value is None else str(value))
        elif p.kind == "document":
            e.setPlainText("" if value is None else document_text(value))

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
            return parse_document(text, where=p.key)
        except RunFileError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FormError(f"{p.key} is not a readable document ({first}); "
                            "write it as YAML or JSON") from None


class OptionEditor(QObject):
    """One option: a tick saying "pass it", and (for a valued option) its value.

    An option left unticked is not passed, so the module's own default
    applies; a switch (``bool``) is the tick alone.  The tick and the value
    are laid out by the options box, ticks in one column and values in the next.
    """

    changed = Signal()

    def __init__(self, option: Option, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.option = o = option
        tip = o.description or f"The module's option {o.flag}."
        if o.sets:
            tip += f"\nOverrides the setting {o.sets} for this run."
        self.given = QCheckBox(o.flag)
        self.given.setObjectName(f"option:{o.flag}")
        self.given.setToolTip(tip + ("\nTicked: the run starts with this switch." if o.kind == "bool"
                                     else "\nTicked: the run starts with this option and the "
                                          "value beside it; unticked: the module's default."))
        self.given.toggled.connect(self._toggled)
        self.editor: QWidget | None = None
        if o.kind != "bool":
            self.editor = self._build(o)
            self.editor.setObjectName(f"option-value:{o.flag}")
            self.editor.setToolTip(tip)
            self.editor.setEnabled(False)

    def _build(self, o: Option) -> QWidget:
        if o.kind == "int":
            box = QSpinBox()
            box.setRange(-INT_LIMIT, INT_LIMIT)
            box.valueChanged.connect(self.changed)
            return box
        if o.kind == "float":
            box = _FloatBox()
            box.setDecimals(10)
            box.setRange(-FLOAT_LIMIT, FLOAT_LIMIT)
            box.valueChanged.connect(self.changed)
            return box
        if o.kind == "choice":
            box = QComboBox()
            box.addItems(list(o.choices))
            box.currentIndexChanged.connect(self.changed)
            return box
        box = QLineEdit()
        box.setPlaceholderText("value")
        box.textChanged.connect(self.changed)
        return box

    def _toggled(self, on: bool) -> None:
        if self.editor is not None:
            self.editor.setEnabled(on)
        self.changed.emit()

    def value(self) -> Any:
        """The option's value typed as declared; ``None`` when it is not to be passed."""
        if not self.given.isChecked():
            return None
        e, kind = self.editor, self.option.kind
        if kind == "bool":
            return True
        if kind == "int":
            return int(e.value())
        if kind == "float":
            return float(e.value())
        if kind == "choice":
            return e.currentText()
        return e.text()

    def set_value(self, value: Any) -> None:
        self.given.setChecked(value is not None and value is not False)
        e, kind = self.editor, self.option.kind
        if value is None or e is None:
            return
        if kind in ("int", "float") and finite_number(value) is not None:
            e.setValue(int(value) if kind == "int" else float(value))
        elif kind == "choice" and str(value) in self.option.choices:
            e.setCurrentText(str(value))
        elif kind == "text":
            e.setText(str(value))


class DeviceChooser(QGroupBox):
    """The devices of the module's ``setup.yaml`` a run uses, for a module that
    ``chooses_devices``: a checkable list filled from what the module answered
    (``--devices``), the operator's choice kept with the run."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Devices", parent)
        self.setToolTip("The devices of the module's setup.yaml a run of this configuration "
                        "uses, as the module answers. Untick one the run is not to use; the "
                        "choice is kept with the run.")
        layout = QVBoxLayout(self)
        self.note = QLabel("The module decides from the configuration which devices of its "
                           "setup.yaml a run uses; they are listed here once it has been asked.")
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        self.list = QListWidget()
        self.list.setObjectName("devices")
        self.list.setToolTip("Tick the devices the run is to use (Space ticks the selected one).")
        self.list.itemChanged.connect(lambda _item: self.changed.emit())
        self.list.setVisible(False)
        layout.addWidget(self.list)
        self._all = False

    def set_devices(self, names: list[str] | None, problem: str = "") -> None:
        """Show the module's answer: names, ``None`` (every device), or a problem."""
        chosen = self.devices()
        self.list.blockSignals(True)
        self.list.clear()
        self._all = names is None and not problem
        if problem:
            self.note.setText(f"<span style='color:#c0392b'>{html.escape(problem)}</span>")
        elif names is None:
            self.note.setText("The module uses every device of its setup.yaml for this "
                              "configuration.")
        else:
            self.note.setText("The devices this configuration uses:" if names else
                              "This configuration uses no device.")
        for name in names or []:
            item = QListWidgetItem(name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            keep = chosen is None or name in chosen
            item.setCheckState(Qt.CheckState.Checked if keep else Qt.CheckState.Unchecked)
            item.setToolTip(f"Ticked: the run uses {name}.")
            self.list.addItem(item)
        self.list.setVisible(bool(names))
        rows = max(1, min(6, len(names or [])))
        self.list.setFixedHeight(self.list.sizeHintForRow(0) * rows + 8 if names else 0)
        self.list.blockSignals(False)
        self.changed.emit()

    def devices(self) -> list[str] | None:
        """The ticked devices; ``None`` when the module's answer is "all" or not in yet."""
        if self.list.count() == 0:
            return None
        return [self.list.item(i).text() for i in range(self.list.count())
                if self.list.item(i).checkState() == Qt.CheckState.Checked]


class EnvironmentList(QGroupBox):
    """The variables the module's runs read, and which required ones a run would lack."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Environment", parent)
        self.setToolTip("The environment variables the module says its runs read, whether each "
                        "is required, and whether the run's environment (spacrq's, the "
                        "module's .env, the declaration's env) sets it.")
        layout = QVBoxLayout(self)
        self.text = QLabel()
        self.text.setObjectName("environment")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.text)
        self.missing: list[str] = []

    def show_environment(self, variables: list[Mapping[str, Any]]) -> None:
        text, self.missing = environment_text(variables)
        self.text.setText(text or "The module reads no environment variable it declares.")


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
        self.option_editors: dict[str, OptionEditor] = {}
        self.device_chooser: DeviceChooser | None = None
        self.environment: EnvironmentList | None = None
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
        self.option_editors = {}
        self.device_chooser = None
        self.environment = None
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
        self._build_run_extras(manifest)
        self._layout.addStretch(1)

    def _build_run_extras(self, manifest: Mapping[str, Any]) -> None:
        """The options, devices and environment boxes, for a manifest that declares them."""
        options = options_of(manifest)
        if options:
            box = QGroupBox("Options")
            box.setToolTip("The module's own command-line options; a ticked one is passed to "
                           "the run (and to its resume).")
            grid = QGridLayout(box)
            grid.setColumnStretch(1, 1)
            for row, option in enumerate(options):
                editor = OptionEditor(option, box)
                editor.changed.connect(self.changed)
                grid.addWidget(editor.given, row, 0)
                if editor.editor is not None:
                    grid.addWidget(editor.editor, row, 1)
                self.option_editors[option.flag] = editor
            self._layout.addWidget(box)
        if manifest.get("chooses_devices"):
            self.device_chooser = DeviceChooser()
            self.device_chooser.changed.connect(self.changed)
            self._layout.addWidget(self.device_chooser)
        if manifest.get("environment"):
            self.environment = EnvironmentList()
            self._layout.addWidget(self.environment)

    def set_defaults(self) -> None:
        """Show the module's declared defaults in every field (a new run's starting point)."""
        for editor in self.editors.values():
            if editor.parameter.default is not None:
                editor.set_value(editor.parameter.default)

    def set_config(self, config: Mapping[str, Any]) -> None:
        """Fill the fields from a configuration document (unknown keys ignored)."""
        for editor in self.editors.values():
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

    # -- what else a run starts with --------------------------------------------------
    def options(self) -> dict[str, Any]:
        """The ticked options, ``{flag: value}`` typed as declared."""
        out = {}
        for flag, editor in self.option_editors.items():
            value = editor.value()
            if value is not None:
                out[flag] = value
        return out

    def set_options(self, options: Mapping[str, Any]) -> None:
        for flag, editor in self.option_editors.items():
            editor.set_value(options.get(flag))

    def set_devices(self, names: list[str] | None, problem: str = "") -> None:
        """The module's answer to which devices this configuration uses (from the watch)."""
        if self.device_chooser is not None:
            self.device_chooser.set_devices(names, problem)

    def devices(self) -> list[str] | None:
        """The devices ticked, or ``None`` (no choice: the module's own)."""
        return self.device_chooser.devices() if self.device_chooser is not None else None

    def show_environment(self, variables: list[Mapping[str, Any]]) -> None:
        """The environment check of the watch (:func:`spacrq.experiments.environment.
        environment_check`) shown beside the form."""
        if self.environment is not None:
            self.environment.show_environment(variables)

    def missing_environment(self) -> list[str]:
        """The required variables the run would lack, as last shown."""
        return list(self.environment.missing) if self.environment is not None else []
