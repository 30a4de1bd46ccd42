"""The book's translation tooling on the command line (ddpdemo.book.i18n
keeps the translations; ddpdemo.book.zh_book builds the Chinese site).

    python -m ddpdemo.book import [DIR]   # DIR/<stem>.zh.json -> i18n/zh/
    python -m ddpdemo.book stale          # stale or missing units, exit 1
    python -m ddpdemo.book export DIR     # those as DIR/<stem>.en.json
    python -m ddpdemo.book accept PAGE [KEY...]  # Chinese brought up to
                                          # date: record the current English
    python -m ddpdemo.book build          # the Chinese site, _build/html/zh
    python -m ddpdemo.book dump PAGE      # a page's units as JSON

Re-running the notebooks is `python -m ddpdemo.book.execute`.
"""
import argparse
import json
import sys
from pathlib import Path

from . import i18n, zh_book


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=i18n.__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=i18n.ROOT,
                        help="the book's root (default: this repository)")
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="DIR/<stem>.zh.json into i18n/zh/")
    imp.add_argument("source", help="folder of <stem>.zh.json files")
    sub.add_parser("stale", help="stale or missing units, old and new "
                   "English side by side; exit status 1 if any")
    sub.add_parser("build", help="derive the Chinese book and build it "
                   "into _build/html/zh")
    exp = sub.add_parser("export", help="DIR/<stem>.en.json of the units "
                         "to translate (stale or missing) for translators")
    exp.add_argument("target")
    acc = sub.add_parser("accept", help="after updating the Chinese of "
                         "stale units, record their current English")
    acc.add_argument("page")
    acc.add_argument("keys", nargs="*", help="default: every stale or "
                     "missing unit of the page")
    dump = sub.add_parser("dump", help="a page's units as JSON")
    dump.add_argument("page")
    args = parser.parse_args(argv)
    if args.command == "import":
        for page, n in i18n.import_json(args.source, args.root).items():
            print(f"{page}: {n} units")
        return 0
    if args.command == "stale":
        report = i18n.stale_report(args.root)
        print(report or "every unit is translated from the current English")
        return 1 if i18n.problems(args.root) else 0
    if args.command == "build":
        try:
            return zh_book.build(args.root).returncode
        except LookupError as err:
            print(err, file=sys.stderr)
            return 1
    if args.command == "export":
        for page, n in i18n.export_todo(args.target, args.root).items():
            print(f"{page}: {n} units to translate")
        return 0
    if args.command == "accept":
        keys = args.keys or [k for p, k, what in i18n.problems(args.root)
                             if p == args.page and what != "untranslated"]
        i18n.accept(args.page, keys, args.root)
        print(f"{args.page}: recorded the current English of "
              f"{', '.join(keys) or 'no unit'}")
        return 0
    if args.command == "dump":
        json.dump(i18n.units(args.page, args.root), sys.stdout,
                  ensure_ascii=False, indent=1)
        return 0


if __name__ == "__main__":
    sys.exit(main())
