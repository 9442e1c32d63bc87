"""A model file without ``[acquisition]`` whose rate no ADS1256 data rate gives for its sensors
is built for point samples (offline/model/sections.py default_chain); the build says so and
names the row rates nearby (an acceptance test wrote rate 1000 with 3 cycled channels: the
build printed no acquisition line and no warning; only the device's check-config refused)."""

from __future__ import annotations

import pytest

pytest.importorskip("scipy.sparse")

from offline.model import load_model_file  # noqa: E402
from offline.model.sections import point_sample_warning  # noqa: E402
from tests.test_small_model_modes import _chain_file  # noqa: E402

SENSOR = '''[[sensors]]
name = "a{i}"
select = {{ at = [0.{i}, 0.0, 0.0] }}
dof = "ux"
kind = "acceleration"
'''


def _file(tmp_path, n_sensors, rate):
    path = _chain_file(tmp_path)
    text = path.read_text().replace("rate = 1000.0", f"rate = {rate!r}")
    path.write_text(text + "".join(SENSOR.format(i=i) for i in range(2, 1 + n_sensors)))
    return load_model_file(path)


def test_a_rate_no_data_rate_gives_is_named_with_the_row_rates_nearby(tmp_path):
    spec = _file(tmp_path, 3, 1000.0)
    assert spec.chain().ideal
    msg = point_sample_warning(spec)
    # the row rate of 3 cycled channels nearest to 1000 (ADS1256 datasheet Table 14: a
    # cycling throughput of 3043 Hz at 7500 SPS, 3043 / 3 rows/s)
    assert "no ADS1256 data rate gives 1000 rows/s with 3 sensor(s) in cycle mode" in msg
    assert "1014.33 (7500 SPS)" in msg and "[acquisition]" in msg


@pytest.mark.parametrize("n, rate", [(1, 1000.0), (3, 3043.0 / 3.0)])
def test_a_rate_the_chip_gives_has_no_warning(tmp_path, n, rate):
    spec = _file(tmp_path, n, rate)
    assert not spec.chain().ideal
    assert point_sample_warning(spec) is None


def test_a_declared_ideal_converter_has_no_warning(tmp_path):
    path = _chain_file(tmp_path)
    path.write_text(path.read_text() + '[acquisition]\nconverter = "ideal"\n')
    assert point_sample_warning(load_model_file(path)) is None


def test_the_limits_noise_line_names_a_declared_noise_std(tmp_path):
    # a sensor with noise_std: the limit uses that std (offline/limit/model.py _noise_var);
    # its printed line said "noise 1 %" (the unused relative level) before
    from offline.limit.model import model_limit

    path = _chain_file(tmp_path)
    path.write_text(path.read_text().replace('kind = "acceleration"\n',
                                             'kind = "acceleration"\nnoise_std = 0.002\n'))
    lim = model_limit(load_model_file(path), exact=False, delays=(0.0,))
    assert "noise std 0.002 (noise_std)" in lim.format()
    assert lim.noise_std[0] == pytest.approx(0.002, rel=1e-12)  # the declared value itself
