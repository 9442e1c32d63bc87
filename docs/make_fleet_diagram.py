"""Make docs/img/fleet.svg: the parts of a fleet (devices, broker, historians, database,
Grafana, monitor) and what flows between them, for docs/fleet.md.

    python docs/make_fleet_diagram.py [OUT.svg]     # default docs/img/fleet.svg

Boxes and arrows drawn with matplotlib (Agg, SVG with the text kept as text, no date and a
fixed hash salt, so that the file only changes when this script does).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent

# (x, y, width, height, title, lines, colour) in axes units (0..100 x 0..60)
BOXES = {
    "dev": (1, 14, 20, 36, "devices", ["Raspberry Pi + ADC", "vsense-edge run", "",
                                       "estimates 1 kHz", "health, status, meta",
                                       "MQTT v5 (3.1.1 fallback)", "QoS 1, re-send what",
                                       "no subscriber took"], "#dbe9f6"),
    "broker": (34, 14, 19, 36, "broker", ["one node: Mosquitto 2", "persistence on", "",
                                          "or a cluster:", "EMQX, HiveMQ, VerneMQ",
                                          "behind one address", "", "ACL per user, TLS"],
               "#fde9c9"),
    "hist": (61, 30, 18, 20, "historians", ["vsense-edge historian", "x N, one group:",
                                            "$share/<group>/...", "ack after commit"],
             "#dff0d8"),
    "db": (86, 30, 13, 20, "database", ["PostgreSQL", "(TimescaleDB)", "or SQLite", "on a Pi"],
           "#e8e0f0"),
    "mon": (61, 2, 18, 12, "watching", ["monitor, dashboard", "plain subscriptions"],
            "#f2f2f2"),
    "graf": (86, 2, 13, 12, "Grafana", ["dashboards: SQL", "on the tables"], "#f9e0e0"),
}
ARROWS = [  # (from, to, label, label position)
    ("dev", "broker", "estimates, health\nQoS 1", (27.5, 38)),
    ("broker", "hist", "shared\nsubscription", (57, 29)),
    ("hist", "db", "COPY", (82.5, 44)),
    ("broker", "mon", "", None),
    ("db", "graf", "SQL", (92.5, 22)),
]


def _edge(box, towards):
    """The point of ``box``'s border facing the centre of ``towards``."""
    x, y, w, h = box[:4]
    cx, cy = x + w / 2, y + h / 2
    tx, ty = towards[0] + towards[2] / 2, towards[1] + towards[3] / 2
    if abs(tx - cx) * h >= abs(ty - cy) * w:  # leaves through a side
        return (x + w if tx > cx else x, cy + (ty - cy) * (w / 2) / max(abs(tx - cx), 1e-9))
    return (cx + (tx - cx) * (h / 2) / max(abs(ty - cy), 1e-9), y + h if ty > cy else y)


def draw(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "vsense-fleet",
                         "font.family": "DejaVu Sans"})
    fig, ax = plt.subplots(figsize=(10, 6))
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 60)
    ax.axis("off")
    for x, y, w, h, title, lines, colour in BOXES.values():
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.4,rounding_size=1.2",
                                    fc=colour, ec="#555555", lw=1.0))
        ax.text(x + w / 2, y + h - 2.2, title, ha="center", va="top", fontsize=11,
                weight="bold")
        ax.text(x + w / 2, y + h - 6.0, "\n".join(lines), ha="center", va="top", fontsize=8,
                linespacing=1.45)
    for a, b, label, at in ARROWS:
        p, q = _edge(BOXES[a], BOXES[b]), _edge(BOXES[b], BOXES[a])
        ax.add_patch(FancyArrowPatch(p, q, arrowstyle="-|>", mutation_scale=14, lw=1.3,
                                     color="#333333", shrinkA=3, shrinkB=3))
        if label:
            ax.text(*at, label, ha="center", va="center", fontsize=8, style="italic",
                    bbox={"fc": "white", "ec": "none", "pad": 1.0})
    ax.text(50, 58.5, "A vsense fleet: one broker (or a cluster), historians sharing the "
            "subscription, one database, Grafana", ha="center", va="top", fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format=out.suffix[1:] or "svg", bbox_inches="tight",
                metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DOCS / "img" / "fleet.svg"
    draw(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
