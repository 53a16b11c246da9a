# Revenue per quarter from sales.csv: a table on stdout, a chart in report.png.
#   sbx exec --file examples/sales.csv --output-dir out examples/sales_report.py
import matplotlib
import matplotlib.pyplot as plt
import pandas as pd

sales = pd.read_csv("sales.csv", parse_dates=["date"])
sales["revenue"] = sales["units"] * sales["unit_price"]
quarterly = sales.groupby(sales["date"].dt.to_period("Q"))["revenue"].sum().round(2)
print(quarterly.to_string())

ax = quarterly.plot(kind="bar", title="Revenue per quarter", color="#4C72B0")
ax.set_xlabel("quarter")
ax.set_ylabel("revenue")
plt.tight_layout()
plt.savefig("report.png", dpi=100)
print("wrote report.png")
