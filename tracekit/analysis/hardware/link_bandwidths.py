"""The fastest link each GPU of ``gpu_peaks``' table has to its peers, per direction: what a collective's
bus bandwidth (nccl-tests' "busbw", comparable across operations and group sizes) is held against.

Figures are the vendors' datasheets' total (bidirectional) GPU-to-GPU bandwidth halved: NVLink where the
SXM/OAM board has it (V100 SXM2 300 GB/s, A100 SXM4 600, H100/H200 SXM 900, B200/GB200 1,800), the NVLink
bridge where the card ships with one for its pairs (H100 NVL 600, H200 NVL 900), else PCIe x16 (Gen3 32
GB/s, Gen4 64, Gen5 128 bidirectional). A card that takes an optional bridge (A100 PCIe, A40, RTX 3090,
Quadro GP100) is counted on PCIe. nccl-tests reaches about 75-80 % of these on a healthy NVLink system
with large messages; small messages are latency-bound and never come near. AMD's Infinity Fabric links
are left out (their peer bandwidth depends on the platform's topology): unknown, and said.

Across nodes the network bounds a collective (a 200 Gb/s NIC per GPU: 25 GB/s), whatever the GPU's link:
the collectives command's link_bandwidth option gives the figure to hold it against.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    """A GPU's fastest peer link: its name and its bandwidth per direction (GB/s = 1e9 bytes/s)."""

    name: str
    gb_per_s: float


_PCIE3, _PCIE4, _PCIE5 = Link("PCIe Gen3 x16", 16.0), Link("PCIe Gen4 x16", 32.0), Link("PCIe Gen5 x16", 64.0)
# gpu_peaks' keys -> link
LINKS: dict[str, Link] = {
    "V100 SXM2": Link("NVLink 2 (6 links)", 150.0),
    "V100 PCIe": _PCIE3,
    "T4": _PCIE3,
    "A10": _PCIE4,
    "A40": _PCIE4,
    "A100 SXM4 40GB": Link("NVLink 3 (12 links)", 300.0),
    "A100 SXM4 80GB": Link("NVLink 3 (12 links)", 300.0),
    "A100 PCIe 40GB": _PCIE4,
    "A100 PCIe 80GB": _PCIE4,
    "L4": _PCIE4,
    "L40S": _PCIE4,
    "H100 SXM": Link("NVLink 4 (18 links)", 450.0),
    "H100 PCIe": _PCIE5,
    "H100 NVL": Link("NVLink bridge", 300.0),
    "H200 SXM": Link("NVLink 4 (18 links)", 450.0),
    "H200 NVL": Link("NVLink bridge", 450.0),
    "B200": Link("NVLink 5 (18 links)", 900.0),
    "GB200": Link("NVLink 5 (18 links)", 900.0),
    "RTX 3080": _PCIE4,
    "RTX 3090": _PCIE4,
    "RTX 4090": _PCIE4,
    "RTX 5090": _PCIE5,
    "TITAN RTX": _PCIE3,
    "Quadro GP100": _PCIE3,
}


def gpu_link(key: str | None) -> Link | None:
    """The link of the GPU ``gpu_peaks`` calls ``key`` (None: unknown GPU, or a link not in the table)."""
    return LINKS.get(key) if key else None
