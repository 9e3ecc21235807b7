#!/usr/bin/env python3
"""Renders templates with Jinja2 as transformers' apply_chat_template does: the reference of
tests/models/chat/chat_template_test.cpp.

    jinja2_render.py CASES OUT

CASES is a JSON list of {"template": text, "context": {...}}. OUT gets one JSON line per case:
{"text": rendered} or {"error": message}. The environment is transformers'
(_compile_jinja_template): an immutable sandbox with trim_blocks and lstrip_blocks, the
loopcontrols extension, its tojson filter (ensure_ascii off) and the raise_exception and
strftime_now globals.
"""
import json
import sys
from datetime import datetime

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def main():
    cases_path, out_path = sys.argv[1:3]
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    with open(out_path, "w", encoding="utf-8") as out:
        for case in cases:
            try:
                text = env.from_string(case["template"]).render(**case["context"])
                out.write(json.dumps({"text": text}) + "\n")
            except Exception as e:  # every failure is a result to compare, not a crash
                out.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")


if __name__ == "__main__":
    main()
