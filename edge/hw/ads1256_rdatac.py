"""Continuous (RDATAC) reads of the ADS1256 driver, mixed into :class:`edge.hw.ads1256.ADS1256`.

RDATAC is issued after DRDY falls and keeps CS low; each conversion is then shifted out as
three bytes after its DRDY falls (no command), until SDATAC. Per sample the driver reads the
DRDY level, waits for the falling edge when it is high, reads the clock and clocks three
bytes: :meth:`ContinuousReads.read_continuous`.

Missed conversions. The chip overwrites a conversion nobody read when the next one completes
(a driver late by more than one period, e.g. descheduled); the data of the later one is read
and nothing in it says so. The driver counts them (``stats["missed_conversions"]``) from the
DRDY timing: a sample whose falling edge was waited for is an anchor, its conversion number

    k = k_a + round((t - t_a) / T)                   (T = 1 / data rate; t_a, k_a: last anchor)

and a sample whose DRDY was already low when the driver looked (seen at ``t``, after its
fall and before the next) is conversion ``k = k_a + floor((t - t_a) / T)``, at least one
more than the previous sample. Every step of ``k`` by more than one adds the conversions in
between. Exact while the edge wake-up latency is below T / 2 (the anchors) and the data
clock and the host clock agree to better than T / 2 between anchors; a late sample seen
within that latency after its fall is counted at the next anchor.
"""

from __future__ import annotations

import math

from edge.hw.ads1256_spec import RDATAC, SDATAC, ADS1256Error, DrdyTimeout


class ContinuousReads:
    """RDATAC mode; the port, timing and DRDY-wait attributes are the driver's
    (:class:`edge.hw.ads1256.ADS1256`)."""

    def start_continuous(self) -> None:
        """RDATAC (issued after DRDY falls, as the datasheet requires); CS stays low.

        The conversion that made DRDY fall is skipped: at high rates there is no time left to
        shift it out (RDATAC + t6 + 24 bits > 1/f_DATA at 30 kSPS and 1 MHz SCLK). The first
        :meth:`read_continuous` sample is the next conversion.
        """
        self.wait_drdy(self.calibration_timeout_s(), "RDATAC start")
        self._cs(True)
        self._command([RDATAC], self.t11_long_ns)
        self.continuous = True
        self._rdatac_end = self._last_cmd_end
        # wait for the *next* falling edge (DRDY is still low from the skipped conversion)
        g, pin = self.gpio, self.pins.drdy
        if g.wait_for_edge(pin, g.FALLING, timeout=max(1, math.ceil(
                self.calibration_timeout_s() * 1e3))) is None:
            self._cs(False)
            self.continuous = False
            raise DrdyTimeout(pin, self.calibration_timeout_s(), "first RDATAC conversion")
        # missed-conversion count (module docstring): this edge is conversion 0, the anchor
        self._conv = [self.clock.monotonic_ns(), 0, -1]  # anchor t [ns], anchor k, last k
        self._period_ns = 1e9 / self.drate

    def read_continuous(self, out_codes, out_t_ns, n: int | None = None) -> int:
        """Fill ``out_codes[:n]`` (int) and ``out_t_ns[:n]`` from RDATAC; returns n.

        Raises :class:`DrdyTimeout` (``n_read`` = rows filled) when DRDY stays high.
        """
        if not self.continuous:
            raise ADS1256Error("read_continuous: call start_continuous() first")
        n = len(out_codes) if n is None else n
        g, pin, spi, clock = self.gpio, self.pins.drdy, self.spi, self.clock
        readbytes, ginput = spi.readbytes, g.input
        first_wait = self._rdatac_end
        conv, T, stats = self._conv, self._period_ns, self.stats
        for i in range(n):
            if ginput(pin) == 0:
                t = clock.monotonic_ns()
                # k = k_a + floor((t - t_a) / T): the conversion DRDY showed, seen late
                # (+2 ns: the simulator's integer edge times)
                k = conv[1] + int((t - conv[0] + 2) // T)
            else:
                edges = stats["drdy_missed_edge"]
                try:
                    t = self.wait_drdy(checked=True)
                except DrdyTimeout as exc:
                    exc.n_read = i
                    raise
                if stats["drdy_missed_edge"] == edges:  # t is the edge: an anchor
                    # k = k_a + round((t - t_a) / T)
                    k = conv[1] + int(round((t - conv[0]) / T))
                    conv[0], conv[1] = t, k
                else:
                    k = conv[1] + int((t - conv[0] + 2) // T)
            if k <= conv[2]:
                k = conv[2] + 1
            elif k > conv[2] + 1:
                stats["missed_conversions"] += k - conv[2] - 1
            conv[2] = k
            if first_wait:
                # t6 after RDATAC before the first data read (later reads follow a DRDY)
                self._wait_since(first_wait, self.t6_ns)
                first_wait = 0
                self._rdatac_end = 0
            b = readbytes(3)
            raw = (b[0] << 16) | (b[1] << 8) | b[2]
            out_codes[i] = raw - 0x1000000 if raw & 0x800000 else raw
            out_t_ns[i] = t
        return n

    def stop_continuous(self) -> None:
        """SDATAC (after DRDY falls and before it rises again, per the datasheet); CS high."""
        if not self.continuous:
            return
        try:
            try:
                self.wait_drdy(self.calibration_timeout_s(), "SDATAC")
            except DrdyTimeout:
                pass  # send SDATAC anyway: the chip may be wedged, do not lose the CS release
            self._command([SDATAC], self.t11_short_ns)
        finally:
            self.continuous = False
            self._cs(False)
