"""``system_info`` over a fake /proc, /sys and device tree, and over this machine's own."""

from __future__ import annotations

from pathlib import Path

from tools.system_info import read_system


def fake_root(root: Path, *, pi: bool) -> Path:
    (root / "proc").mkdir(parents=True)
    (root / "proc/meminfo").write_text(
        "MemTotal:        3884532 kB\nMemFree:          120000 kB\nMemAvailable:    2942068 kB\n"
    )
    (root / "proc/uptime").write_text("93784.51 180000.00\n")
    zone = root / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("cpu-thermal\n")
    (zone / "temp").write_text("48312\n")
    if pi:
        (root / "proc/device-tree").mkdir()
        (root / "proc/device-tree/model").write_bytes(b"Raspberry Pi 4 Model B Rev 1.4\0")
    return root


def test_a_raspberry_pi_reports_its_model_temperature_memory_and_uptime(tmp_path: Path) -> None:
    report = read_system(fake_root(tmp_path / "root", pi=True), tmp_path)
    lines = report.splitlines()
    assert lines[0] == "Board: Raspberry Pi 4 Model B Rev 1.4"
    assert "CPU temperature: 48.3 °C" in lines
    assert "Memory: 920 MiB used of 3793 MiB (2873 MiB available)" in lines
    assert "Uptime: 1 d 2 h 3 min" in lines
    assert any(line.startswith("Load: ") and "cores)" in line for line in lines)
    assert any(line.startswith("Disk (data): ") for line in lines)


def test_a_machine_without_a_device_tree_still_reports(tmp_path: Path) -> None:
    report = read_system(fake_root(tmp_path / "root", pi=False), tmp_path)
    assert report.startswith("Board: Linux ") and "(no device tree model)" in report
    assert "CPU temperature: 48.3 °C" in report


def test_missing_files_are_left_out_not_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = read_system(tmp_path / "empty", tmp_path)
    assert report.startswith("Board: ") and "Memory" not in report and "Uptime" not in report


def test_this_machine(tmp_path: Path) -> None:
    report = read_system(Path("/"), tmp_path)
    assert "Memory: " in report and "Uptime: " in report
