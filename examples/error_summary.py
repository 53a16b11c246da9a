# Count the ERROR lines of every .log file in the workspace into
# error_summary.csv.
#   sbx exec --input-dir examples/logs --output-dir out examples/error_summary.py
import csv, glob

rows = []
for path in sorted(glob.glob("**/*.log", recursive=True)):
    with open(path, errors="replace") as f:
        rows.append((path, sum(1 for line in f if " ERROR " in line)))
with open("error_summary.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["file", "errors"])
    w.writerows(rows)
for path, n in rows:
    print(f"{path}: {n} errors")
