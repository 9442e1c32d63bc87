"""The daemon's end-of-run summary line (edge/daemon/summary.py)."""

from edge.daemon.summary import run_summary


def test_summary_names_every_loss_counter_and_the_latency_start():
    h = {"samples": 1000, "estimates": 980, "missed_conversions": 4, "lost_samples": 2, "overruns": 1, "bad_samples": 3,
         "estimator_resets": 1, "latency_us": {"p99": 534.4}, "latency_from": "drdy",
         "publish": {"published": 20, "drops_samples": 5, "unsent_samples": 0},
         "recorder": {"files": 2, "bytes": 57340, "dropped_samples": 0}}
    assert run_summary(h) == (
        "run summary: 1000 samples, 980 estimates, 4 missed conversions, 2 lost, 1 overruns, "
        "3 bad samples, "
        "1 estimator resets, latency p99 534 us (from drdy); MQTT 20 messages published, "
        "5 samples dropped, 0 unsent; recorder 2 files, 57340 bytes, 0 samples dropped")


def test_summary_without_mqtt_recorder_or_latency():
    # MQTT disabled, no recorder, no sample yet: those parts are left out, p99 shown as "-"
    assert run_summary({"latency_us": {"p99": None}}) == (
        "run summary: 0 samples, 0 estimates, 0 missed conversions, 0 lost, 0 overruns, "
        "0 bad samples, "
        "0 estimator resets, latency p99 - (from ?)")
