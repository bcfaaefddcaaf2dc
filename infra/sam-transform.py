#!/usr/bin/env python3
"""Prints template.yaml after the SAM transform, as JSON, offline.

Uses the samtranslator that cfn-lint bundles (the same transform cfn-lint
checks), so tests can check the resources CloudFormation will really create:

    python3 infra/sam-transform.py template.yaml > /tmp/transformed.json
"""
import json
import sys

try:
    from cfnlint.decode import decode
    from cfnlint.template.transforms._sam import Transform
except ImportError as e:  # pragma: no cover
    sys.exit(f"sam-transform: cfn-lint is needed (pip install cfn-lint): {e}")


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    tpl, matches = decode(path)
    if matches:
        for m in matches:
            print(f"sam-transform: {m}", file=sys.stderr)
        return 1
    t = Transform(path, tpl, "us-east-1")
    errs = t.transform_template()
    if errs:
        for m in errs:
            print(f"sam-transform: {m}", file=sys.stderr)
        return 1
    json.dump(t.template(), sys.stdout, indent=1, sort_keys=True, default=str)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
