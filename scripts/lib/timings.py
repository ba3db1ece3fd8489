#!/usr/bin/env python3
"""Per-test wall times of a cargo-nextest run, from its JUnit report.

    timings.py JUNIT_XML REPORT_TSV [N]

Writes every test's time to REPORT_TSV (seconds, status, binary, test; slowest first) and
prints the N (default 10) slowest and the totals, so that every run of the test command
shows where its time went (docs/testing.md, "Where the time goes")."""
import sys
import xml.etree.ElementTree as ET


def main():
    junit, report = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    rows = []
    for suite in ET.parse(junit).getroot().iter("testsuite"):
        for case in suite.iter("testcase"):
            status = "passed"
            for tag in ("failure", "error", "skipped"):
                if case.find(tag) is not None:
                    status = tag
            rows.append((float(case.get("time", "0")), status, suite.get("name", ""),
                         case.get("name", "")))
    rows.sort(reverse=True)
    with open(report, "w") as out:
        out.write("seconds\tstatus\tbinary\ttest\n")
        for t, status, binary, name in rows:
            out.write("%.1f\t%s\t%s\t%s\n" % (t, status, binary, name))
    total = sum(r[0] for r in rows)
    print("tests: %d, their times add up to %.0f s (%.1f min); every time in %s"
          % (len(rows), total, total / 60, report))
    print("the %d slowest:" % min(n, len(rows)))
    for t, status, binary, name in rows[:n]:
        print("  %7.1f s  %s  %s%s" % (t, binary, name, "" if status == "passed" else "  (%s)" % status))


if __name__ == "__main__":
    main()
