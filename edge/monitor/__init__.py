"""``vsense-edge monitor``: a live terminal view of one device over MQTT.

    vsense-edge monitor --broker HOST[:PORT] --device ID [--base vsense] [--csv FILE]
                        [--once] [--duration S] [--timeout S] [--interval S]
    vsense-edge monitor --broker HOST[:PORT] --fleet [--once] ...   (edge.monitor.fleet)
    vsense-edge monitor -c edge.toml --username viewer --password-file FILE [--tls-ca CA] ...

Login and TLS as the daemon's ``[mqtt]`` (:mod:`edge.monitor.connect`): from a device's
config (``-c``) and/or ``--username``, ``--password-file``, ``--password-env``, ``--tls``,
``--tls-ca``, ``--tls-cert``, ``--tls-key``; a refused login, a TLS failure or a plain/TLS port
mismatch is named.

Subscribes to ``<base>/<device>/#`` (status, meta, estimates, health, cmd/reply) and redraws
about twice a second with plain ANSI escapes (no curses): state, bundle, the nominal rate (meta)
and the rate measured from the arriving estimates, the latest forces and virtual outputs with
their units, and the health counters (loop latency percentiles, overruns, lost samples,
publisher and recorder queues). ``--csv FILE`` records every estimate received
(``time,seq,<forces>,<outputs>,flags``; time = the device's sample time [s]; duplicates from
QoS 1 redelivery are skipped by ``seq``). ``--once`` prints one view as soon as ``meta`` and
an ``estimates`` batch are in (waiting up to ``--timeout`` s for ``health`` too) and exits.

Exit codes: 0 ok; 1 ``--once`` timed out without estimates; 2 bad arguments, the broker
could not be reached or refused the login.

:class:`DeviceView` holds the state and is pure (fed with topic suffix and payload), so it is
also what ``offline.demo`` uses to collect a run.
"""

from edge.monitor.cli import add_arguments, main, run_monitor  # noqa: F401
from edge.monitor.client import CsvRecorder, DeviceSubscriber, redraw  # noqa: F401
from edge.monitor.render import render  # noqa: F401
from edge.monitor.view import CLEAR, DeviceView, parse_broker  # noqa: F401
