#!/usr/bin/env python3
"""Render a Helm chart without helm, for offline checks.

Usage: render_chart.py CHART_DIR [--namespace NS] [--release NAME] [--set key.path=value ...]

Supports the subset of Go templates / Sprig the moco chart uses, and fails loudly on anything
else: actions {{ ... }} with {{- / -}} trimming, comments {{/* */}}, if/else/with/range/end,
pipelines over .Values/.Release/.Chart/. paths and string/number literals, and the functions
default, quote, toYaml, indent, nindent, trim, lower, upper, required.
Writes the rendered templates (crds/ first, then templates/*.yaml sorted) as one YAML stream,
each document preceded by "# Source: <path>" like `helm template`.
"""
import os
import re
import sys

import yaml

ACTION = re.compile(r"\{\{(-?)(\s*)(.*?)(\s*)(-?)\}\}", re.S)


class TemplateError(Exception):
    pass


def tokenize(text):
    """Split into ('text', s) and ('action', s) tokens, applying trim markers."""
    tokens = []
    pos = 0
    for m in ACTION.finditer(text):
        tokens.append(["text", text[pos:m.start()]])
        if m.group(1) == "-" and tokens[-1][1] is not None:
            tokens[-1][1] = tokens[-1][1].rstrip(" \t\r\n")
        tokens.append(["action", m.group(3), m.group(5) == "-"])
        pos = m.end()
    tokens.append(["text", text[pos:]])
    # right trim markers remove leading whitespace of the following text
    for i, tok in enumerate(tokens):
        if tok[0] == "action" and tok[2] and i + 1 < len(tokens):
            tokens[i + 1][1] = tokens[i + 1][1].lstrip(" \t\r\n")
    return [(t[0], t[1]) for t in tokens]


def parse(tokens):
    """Build a tree: list of nodes; control nodes are (kind, expr, body, else_body)."""
    root = []
    stack = [(None, root)]
    for kind, value in tokens:
        body = stack[-1][1]
        if kind == "text":
            if value:
                body.append(("text", value))
            continue
        action = value.strip()
        if action.startswith("/*"):
            continue
        word = action.split(None, 1)[0] if action else ""
        rest = action[len(word):].strip()
        if word in ("if", "with", "range"):
            node = [word, rest, [], None]
            body.append(node)
            stack.append((node, node[2]))
        elif word == "else":
            node = stack[-1][0]
            if node is None:
                raise TemplateError("else without if")
            if rest:
                raise TemplateError(f"unsupported: {{{{ {action} }}}}")
            node[3] = []
            stack[-1] = (node, node[3])
        elif word == "end":
            if len(stack) == 1:
                raise TemplateError("end without block")
            stack.pop()
        else:
            body.append(("expr", action))
    if len(stack) != 1:
        raise TemplateError("unclosed block")
    return root


def lookup(path, dot, ctx):
    if path == ".":
        return dot
    parts = path.split(".")[1:]
    value = ctx if path.startswith(".Values") or path.startswith(".Release") or path.startswith(".Chart") else dot
    if value is dot and not isinstance(dot, dict):
        raise TemplateError(f"cannot resolve {path} on {dot!r}")
    for part in parts:
        if isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def literal_or_path(arg, dot, ctx):
    if arg.startswith('"') and arg.endswith('"'):
        return arg[1:-1]
    if re.fullmatch(r"-?\d+", arg):
        return int(arg)
    if arg in ("true", "false"):
        return arg == "true"
    if arg.startswith("."):
        return lookup(arg, dot, ctx)
    raise TemplateError(f"unsupported argument {arg!r}")


def to_yaml(value):
    if value is None:
        return "null"
    text = yaml.safe_dump(value, default_flow_style=False, sort_keys=True).rstrip("\n")
    return text


def call(fn, args, piped, dot, ctx):
    vals = [literal_or_path(a, dot, ctx) for a in args]
    if piped is not _NOTHING:
        vals.append(piped)
    if fn == "default":
        default, value = vals[0], vals[1] if len(vals) > 1 else None
        return value if value not in (None, "", [], {}, False, 0) else default
    if fn == "quote":
        return '"' + str(vals[0]).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if fn == "toYaml":
        return to_yaml(vals[0])
    if fn in ("indent", "nindent"):
        pad = " " * int(vals[0])
        text = "\n".join(pad + line for line in str(vals[1]).split("\n"))
        return ("\n" + text) if fn == "nindent" else text
    if fn == "trim":
        return str(vals[0]).strip()
    if fn == "lower":
        return str(vals[0]).lower()
    if fn == "upper":
        return str(vals[0]).upper()
    if fn == "required":
        if vals[1] in (None, ""):
            raise TemplateError(str(vals[0]))
        return vals[1]
    raise TemplateError(f"unsupported function {fn!r}")


_NOTHING = object()


def split_args(text):
    return re.findall(r'"(?:[^"\\]|\\.)*"|\S+', text)


def evaluate(expr, dot, ctx):
    value = _NOTHING
    for stage in [s.strip() for s in expr.split("|")]:
        words = split_args(stage)
        if not words:
            raise TemplateError(f"empty pipeline stage in {expr!r}")
        head, args = words[0], words[1:]
        if head.startswith(".") or head.startswith('"') or re.fullmatch(r"-?\d+", head):
            if args or value is not _NOTHING:
                raise TemplateError(f"unsupported pipeline {expr!r}")
            value = literal_or_path(head, dot, ctx)
        else:
            value = call(head, args, value, dot, ctx)
    return value


def truthy(value):
    return value not in (None, False, 0, "", [], {})


def render(nodes, dot, ctx):
    out = []
    for node in nodes:
        if node[0] == "text":
            out.append(node[1])
        elif node[0] == "expr":
            value = evaluate(node[1], dot, ctx)
            out.append("" if value is None else (to_yaml(value) if isinstance(value, (dict, list)) else str(value).lower() if isinstance(value, bool) else str(value)))
        else:
            kind, expr, body, else_body = node[0], node[1], node[2], node[3]
            value = evaluate(expr, dot, ctx)
            if kind == "if":
                out.append(render(body if truthy(value) else (else_body or []), dot, ctx))
            elif kind == "with":
                out.append(render(body, value, ctx) if truthy(value) else render(else_body or [], dot, ctx))
            elif kind == "range":
                items = value or []
                if not items:
                    out.append(render(else_body or [], dot, ctx))
                for item in (items.values() if isinstance(items, dict) else items):
                    out.append(render(body, item, ctx))
    return "".join(out)


def set_value(values, assignment):
    """helm-style --set: dotted keys with optional [index] steps; the value is parsed as YAML."""
    key, _, raw = assignment.partition("=")
    steps = []
    for part in key.split("."):
        m = re.fullmatch(r"([^\[\]]+)((?:\[\d+\])*)", part)
        if not m:
            raise TemplateError(f"unsupported --set key {key!r}")
        steps.append(m.group(1))
        steps.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    target = values
    for step, following in zip(steps, steps[1:]):
        empty = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            while len(target) <= step:
                target.append(None)
            if target[step] is None:
                target[step] = empty
            target = target[step]
        else:
            if not isinstance(target.get(step), (dict, list)):
                target[step] = empty
            target = target[step]
    last = steps[-1]
    value = yaml.safe_load(raw)
    if isinstance(last, int):
        while len(target) <= last:
            target.append(None)
        target[last] = value
    else:
        target[last] = value


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    chart = argv[0]
    namespace, release, sets = "moco-system", "moco", []
    i = 1
    while i < len(argv):
        if argv[i] == "--namespace":
            namespace = argv[i + 1]
            i += 2
        elif argv[i] == "--release":
            release = argv[i + 1]
            i += 2
        elif argv[i] == "--set":
            sets.append(argv[i + 1])
            i += 2
        else:
            raise TemplateError(f"unknown argument {argv[i]}")
    with open(os.path.join(chart, "Chart.yaml")) as f:
        meta = yaml.safe_load(f)
    with open(os.path.join(chart, "values.yaml")) as f:
        values = yaml.safe_load(f) or {}
    for s in sets:
        set_value(values, s)
    ctx = {
        "Values": values,
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": True},
        "Chart": {"Name": meta.get("name"), "Version": meta.get("version"), "AppVersion": meta.get("appVersion")},
    }
    out = []
    crds = os.path.join(chart, "crds")
    for name in sorted(os.listdir(crds)) if os.path.isdir(crds) else []:
        with open(os.path.join(crds, name)) as f:
            out.append(f"---\n# Source: {os.path.basename(chart)}/crds/{name}\n{f.read()}")
    templates = os.path.join(chart, "templates")
    for name in sorted(os.listdir(templates)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(templates, name)) as f:
            text = f.read()
        try:
            rendered = render(parse(tokenize(text)), ctx, {"Values": values, **ctx})
        except TemplateError as e:
            raise TemplateError(f"{name}: {e}") from e
        for doc in re.split(r"^---\s*$", rendered, flags=re.M):
            if doc.strip() and any(line.strip() and not line.lstrip().startswith("#") for line in doc.splitlines()):
                out.append(f"---\n# Source: {os.path.basename(chart)}/templates/{name}\n{doc.strip()}\n")
    text = "".join(out)
    # The result must be valid YAML.
    list(yaml.safe_load_all(text))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (TemplateError, yaml.YAMLError, OSError) as e:
        print(f"render_chart: {e}", file=sys.stderr)
        sys.exit(1)
