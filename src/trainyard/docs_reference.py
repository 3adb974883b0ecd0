"""The reference pages generated from the code: docs/reference/{cli,stack,admission}.md.

Pure functions that return Markdown: `cli_reference` walks a Click command tree (the CLI passes
`typer.main.get_command(app)`), `stack_reference` the stack model's dataclasses (`platform/stack_model.py`: key,
type, default, and each field's docstring as its description), `admission_reference` the webhook's declared rules
(`controller/admission_rules.py`) and the CEL rules of the CRD schemas. `trainyard docs reference` writes them and
`--check` names the pages that differ from what the code generates (a unit test runs the check).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Iterable

from trainyard.controller.admission_rules import ADMISSION_RULES, AdmissionRule
from trainyard.controller.inputs import runtime_schema, trainjob_schema
from trainyard.field_markers import DEFAULT_TEXT
from trainyard.openapi import Rule
from trainyard.platform.stack_fields import has_default, stack_fields
from trainyard.platform.stack_model import NAMESPACE, StackConfig

REFERENCE_DIR = Path("docs") / "reference"
GENERATED = "Generated from the code by `trainyard docs reference`; edit the code, not this page."


# --------------------------------------------------------------------------- Markdown helpers
def cell(text: object) -> str:
    """One table cell: a single line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: Iterable[str], rows: Iterable[Iterable[object]]) -> list[str]:
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def code(text: object) -> str:
    """Inline code; empty text stays empty."""
    text = str(text)
    return f"`{text}`" if text else ""


def help_text(text: str | None) -> str:
    """A command's help as Click shows it: dedented, cut at a form feed."""
    return inspect.cleandoc(text or "").split("\f")[0].strip()


def page(title: str, intro: str, body: list[str]) -> str:
    return "\n".join([f"# {title}", "", GENERATED, "", intro, "", *body]).rstrip() + "\n"


# --------------------------------------------------------------------------- cli.md
def walk_commands(command: Any, path: tuple[str, ...] = ()) -> Iterable[tuple[tuple[str, ...], Any]]:
    """(path, command) of a command and every visible sub-command, depth first, sub-commands by name."""
    if getattr(command, "hidden", False):
        return
    yield path, command
    for name, child in sorted((getattr(command, "commands", None) or {}).items()):
        yield from walk_commands(child, path + (name,))


def param_type(param: Any) -> str:
    """The type Typer shows (`<int>`, `<text>`, `<tenant|queue>`), else Click's type name."""
    if getattr(param, "is_flag", False):
        return "flag"
    try:
        label = param.bare_type()
    except (AttributeError, TypeError):
        label = getattr(getattr(param, "type", None), "name", "") or ""
    label = str(label).strip("<>")
    listed = label.startswith("list[") and label.endswith("]")
    label = label[5:-1] if listed else label
    label = {"str": "text", "int": "integer", "float": "number", "bool": "boolean", "Path": "path"}.get(label, label)
    return f"list of {label}" if listed or getattr(param, "multiple", False) else label


def param_default(param: Any) -> str:
    if param.required:
        return "required"
    default = param.default
    if callable(default) or default is None or default == () or default == []:
        return ""
    if isinstance(default, bool):
        names = param.opts if default or not param.secondary_opts else param.secondary_opts
        return code(names[0]) if getattr(param, "secondary_opts", None) else code(str(default).lower())
    if isinstance(default, (list, tuple)):
        return code(" ".join(map(str, default)))
    return code(getattr(default, "value", default))


def param_name(param: Any) -> str:
    if param.param_type_name == "argument":
        return code(param.name.upper())
    return " / ".join(code(o) for o in [*param.opts, *param.secondary_opts])


def usage(path: tuple[str, ...], command: Any, prog: str) -> str:
    pieces = [prog, *path]
    if any(p.param_type_name != "argument" for p in command.params):
        pieces.append("[OPTIONS]")
    pieces += [(p.name.upper() if p.required else f"[{p.name.upper()}]") + ("..." if p.nargs == -1 else "")
               for p in command.params if p.param_type_name == "argument"]
    if getattr(command, "commands", None):
        pieces.append("COMMAND")
    return " ".join(pieces)


def cli_reference(root: Any, prog: str = "trainyard") -> str:
    """Every command and sub-command of a Click/Typer command tree: help, usage, arguments and options."""
    body: list[str] = []
    commands = list(walk_commands(root))
    body += ["Commands:", ""]
    body += [f"- [{' '.join((prog, *path))}](#{anchor(' '.join((prog, *path)))})" for path, _ in commands if path]
    body.append("")
    for path, command in commands:
        if not path:
            continue
        name = " ".join((prog, *path))
        body += [f"## {name}", ""]
        if getattr(command, "deprecated", False):
            body += ["Deprecated.", ""]
        text = help_text(command.help) or help_text(getattr(command, "short_help", None))
        if text:
            body += [text, ""]
        body += ["```text", usage(path, command, prog), "```", ""]
        subs = [(n, c) for n, c in sorted((getattr(command, "commands", None) or {}).items()) if not c.hidden]
        if subs:
            body += table(("command", "what it does"),
                          [(f"[{n}](#{anchor(name + ' ' + n)})", first_line(c)) for n, c in subs])
            body.append("")
        params = [p for p in command.params if not getattr(p, "hidden", False)]
        if params:
            body += table(("argument / option", "type", "default", "help"),
                          [(param_name(p), param_type(p), param_default(p), help_text(getattr(p, "help", None)))
                           for p in params])
            body.append("")
    return page(f"`{prog}` command reference", help_text(root.help) + " Every command also takes `--help`.", body)


def first_line(command: Any) -> str:
    text = help_text(command.help) or help_text(getattr(command, "short_help", None))
    return text.split("\n\n")[0]


def anchor(heading: str) -> str:
    """GitHub's heading anchor: lower case, spaces to dashes, punctuation other than - and _ dropped."""
    return "".join(c for c in heading.lower().replace(" ", "-") if c.isalnum() or c in "-_")


# --------------------------------------------------------------------------- stack.md
def attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> its docstring (the string literal right after the field in the class body)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = next((n for n in tree.body if isinstance(n, ast.ClassDef)), None)
    out: dict[str, str] = {}
    statements = body.body if body else []
    for node, after in zip(statements, statements[1:] + [None]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr) \
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
            out[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return out


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """(the hint without None, whether None was allowed)."""
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    if not union:
        return hint, False
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), len(args) < len(typing.get_args(hint))


def type_name(hint: Any) -> str:
    """A stack key's type in a stack author's words."""
    hint, _ = _unwrap(hint)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        names = {type_name(a) for a in typing.get_args(hint)}
        return "quantity" if names == {"integer", "string"} else " or ".join(sorted(names))
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return "list of mappings" if dataclasses.is_dataclass(item) else f"list of {type_name(item)}s"
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return "resources (name: quantity)"
    if dataclasses.is_dataclass(hint):
        return "mapping"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(hint, getattr(hint, "__name__", str(hint)))


def default_text(f: dataclasses.Field) -> str:
    if DEFAULT_TEXT in f.metadata:
        return str(f.metadata[DEFAULT_TEXT])
    if not has_default(f):
        return "required"
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    if dataclasses.is_dataclass(value) or value is None:
        return ""
    if isinstance(value, bool):
        return code(str(value).lower())
    if isinstance(value, (tuple, list, dict)) and not value:
        return code("[]" if not isinstance(value, dict) else "{}")
    if isinstance(value, str):
        return code(f'"{value}"' if not value else value)
    return code(value)


def nested_class(hint: Any) -> type | None:
    """The dataclass a key holds (a mapping, or the entries of a list), else None."""
    hint, _ = _unwrap(hint)
    if typing.get_origin(hint) is tuple:
        hint = typing.get_args(hint)[0]
    return hint if dataclasses.is_dataclass(hint) and isinstance(hint, type) else None


def stack_rows(cls: type, prefix: str) -> list[tuple[str, str, str, str]]:
    """(key path, type, default, description) of every key of `cls` and the mappings below it."""
    hints = typing.get_type_hints(cls)
    docs = attribute_docs(cls)
    rows = []
    for key, f in stack_fields(cls).items():
        hint = hints[f.name]
        path = f"{prefix}{key}"
        description = docs.get(f.name, "")
        child = nested_class(hint)
        if child is not None and not description:
            description = " ".join(inspect.cleandoc(child.__doc__ or "").split())
            if description.startswith(f"{child.__name__}("):  # dataclass's generated signature is no description
                description = ""
        rows.append((path, type_name(hint), default_text(f), description))
        if child is not None:
            below = f"{path}[]." if typing.get_origin(_unwrap(hint)[0]) is tuple else f"{path}."
            rows += stack_rows(child, below)
    return rows


def stack_reference(model: type = StackConfig) -> str:
    rows = stack_rows(model, f"{NAMESPACE}:")
    body = table(("key", "type", "default", "what it does"), [(code(k), t, d, text) for k, t, d, text in rows])
    intro = ("Every key of a stack file (`stacks/Pulumi.<env>.yaml`, under `config:`), from the one stack model "
             "(`platform/stack_model.py`: the keys, types and defaults; each description is the field's docstring). "
             "`key[]` is an entry of a list; a mapping's keys follow it. `trainyard platform validate --stack <env>` "
             "checks a stack against these keys and the rules in `platform/stack_validation.py`.")
    return page("Stack configuration reference", intro, body)


# --------------------------------------------------------------------------- admission.md
def schema_rules(schema: Any, path: str = "") -> list[tuple[str, Rule]]:
    """(field path, CEL rule) of every `x-kubernetes-validations` entry of a CRD schema, in schema order."""
    out: list[tuple[str, Rule]] = []
    if not isinstance(schema, dict):
        return out
    for rule in schema.get("x-kubernetes-validations") or []:
        if isinstance(rule, Rule):
            out.append((path or "(object)", rule))
    for name, sub in (schema.get("properties") or {}).items():
        out += schema_rules(sub, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        out += schema_rules(schema["items"], f"{path}[]")
    return out


def schema_bounds(schema: Any, path: str = "") -> list[tuple[str, str]]:
    """(field path, bound) of every numeric `maximum` of a CRD schema (trainyard's upper bounds among them)."""
    out: list[tuple[str, str]] = []
    if not isinstance(schema, dict):
        return out
    if "maximum" in schema:
        out.append((path, f"at most {schema['maximum']}"))
    for name, sub in (schema.get("properties") or {}).items():
        out += schema_bounds(sub, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        out += schema_bounds(schema["items"], f"{path}[]")
    return out


def _rule_rows(rules: Iterable[AdmissionRule]) -> list[tuple[str, ...]]:
    return [(code(r.id), code(r.field), r.refuses, r.fix, r.origin) for r in rules]


def admission_reference(rules: Iterable[AdmissionRule] = ADMISSION_RULES,
                        schemas: Mapping[str, Callable[[], dict]] | None = None) -> str:
    rules = list(rules)
    schemas = schemas if schemas is not None else {"TrainJob": trainjob_schema,
                                                   "TrainingRuntime and ClusterTrainingRuntime": runtime_schema}
    body: list[str] = []
    for kind in dict.fromkeys(r.kind for r in rules):
        refusals = [r for r in rules if r.kind == kind and not r.warning]
        warnings = [r for r in rules if r.kind == kind and r.warning]
        body += [f"## {kind}: refused by the webhook", ""]
        body += table(("rule", "field", "refused", "fix", "from"), _rule_rows(refusals)) + [""]
        if warnings:
            body += [f"## {kind}: warnings (admitted)", ""]
            body += table(("rule", "field", "warned about", "fix", "from"), _rule_rows(warnings)) + [""]
    for kind, schema in schemas.items():
        built = schema()
        body += [f"## {kind}: CRD schema rules", "",
                 "CEL rules (`x-kubernetes-validations`) of the CRD schema in `controller/api*.py`: the API server "
                 "checks them before the webhook is called, and `trainyard validate` checks them too.", ""]
        body += table(("field", "rule", "message"),
                      [(code(p), code(r.rule), r.message + (" (on update)" if r.transition else ""))
                       for p, r in schema_rules(built)]) + [""]
        bounds = schema_bounds(built)
        if bounds:
            body += ["Upper bounds:", ""]
            body += table(("field", "bound"), [(code(p), b) for p, b in bounds]) + [""]
    intro = ("What the admission webhook (`controller/admission.py`) refuses or warns about when a TrainJob or a "
             "runtime is created or updated, with the field it names and the fix. The webhook's rules are declared "
             "in `controller/admission_rules.py`; a unit test (`tests/unit/controller/test_admission_rules.py`) "
             "submits a bad object per rule and checks that the webhook says what the rule declares. "
             "\"from\": `upstream` is Kubeflow Trainer's own webhook rule, `trainyard` the platform's addition. "
             "`trainyard validate TRAINJOB.yaml --runtime FILE` runs the same checks offline.")
    return page("Admission reference", intro, body)


# --------------------------------------------------------------------------- the pages
def reference_pages(cli_root: Any) -> dict[str, str]:
    """File name under docs/reference -> its generated text."""
    return {"cli.md": cli_reference(cli_root), "stack.md": stack_reference(), "admission.md": admission_reference()}


def stale_pages(directory: Path, pages: Mapping[str, str]) -> list[str]:
    """The pages whose file under `directory` is missing or differs from the generated text."""
    return [name for name, text in pages.items()
            if not (directory / name).is_file() or (directory / name).read_text(encoding="utf-8") != text]
