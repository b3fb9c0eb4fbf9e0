# A chart made in the sandbox: Airlock returns output.png as an artifact.
# Run it with `bin/airlock run examples/chart.py --out out` (see README.md).
import matplotlib.pyplot as plt

plt.figure(figsize=(6, 3))
plt.plot([1, 2, 3, 4], [10, 25, 18, 35], color="#3b82f6")
plt.title("Agent Performance")
plt.savefig("output.png")
print("saved output.png")
