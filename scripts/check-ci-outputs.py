#!/usr/bin/env python3
"""Reads a stampede report directory as CI tools would: report.json validated against
report.schema.json (jsonschema, Draft 2020-12) and junit.xml parsed by junitparser.
Prints one line per test case (`case <class> <name> <passed|failure|error> <message>`)
and exits 1 when either file does not hold.

usage: check-ci-outputs.py SCHEMA REPORT_DIR [REPORT_JSON...]
(the extra report.json files are validated against the schema too)
"""
import json
import sys

import jsonschema
from junitparser import Error, Failure, JUnitXml


def validate(schema, path):
    with open(path) as f:
        report = json.load(f)
    jsonschema.Draft202012Validator(schema).validate(report)
    print(f"schema ok {path}")


def main():
    schema_path, report_dir, *others = sys.argv[1:]
    with open(schema_path) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in [f"{report_dir}/report.json", *others]:
        validate(schema, path)
    xml = JUnitXml.fromfile(f"{report_dir}/junit.xml")
    for suite in xml:
        for case in suite:
            verdict, message = "passed", ""
            for r in case.result:
                if isinstance(r, Failure):
                    verdict, message = "failure", r.message
                elif isinstance(r, Error):
                    verdict, message = "error", r.message
            print(f"case {case.classname} {case.name} {verdict} {message}")


if __name__ == "__main__":
    main()
