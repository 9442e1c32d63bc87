"""A byte relay: MQTT over WebSockets from the browser <-> MQTT over TCP (or TLS) to the broker.

Why: Debian's Mosquitto 2.0.11 (bookworm) websockets listener writes to a WebSocket client
only when its main loop wakes up for other traffic (eclipse-mosquitto/mosquitto#2252); measured
here it delivered about 100 messages/s to one page, half of what 10 devices x 1,000 samples/s
in batches of 50 need, and trickled the backlog at ~5 messages/s once the devices stopped.
The relay lets the page reach any broker through its plain MQTT port, with the daemon's TLS
settings, and needs no websockets listener on the broker.

The relay is transparent: it does not parse MQTT (the page's CONNECT carries the credentials);
it only speaks RFC 6455 framing (binary frames, continuation, ping/pong, close; client frames
masked). Stdlib only. One thread per direction per page.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import socket
import ssl
import struct
import threading

log = logging.getLogger("vsense.dashboard")
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_FRAME = 16 * 2**20  # a larger client frame closes the connection (1009)


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for a ``Sec-WebSocket-Key`` (RFC 6455 section 4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked server frame with FIN set."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def _read_exact(f, n: int) -> bytes:
    b = f.read(n)
    if b is None or len(b) < n:
        raise EOFError("WebSocket closed")
    return b


def read_frame(f) -> tuple[bool, int, bytes]:
    """``(fin, opcode, payload)`` of the next client frame (unmasked); EOFError at the end,
    ValueError on a protocol error (unmasked client frame, too large)."""
    b0, b1 = _read_exact(f, 2)
    fin, opcode, masked, n = bool(b0 & 0x80), b0 & 0x0F, bool(b1 & 0x80), b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", _read_exact(f, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", _read_exact(f, 8))[0]
    if not masked:
        raise ValueError("client frame not masked")
    if n > MAX_FRAME:
        raise ValueError(f"client frame of {n} bytes")
    mask = _read_exact(f, 4)
    data = _read_exact(f, n)
    if n:
        # unmask: payload XOR the 4-byte key repeated (as one big integer: fast in CPython)
        k = (mask * (n // 4 + 1))[:n]
        data = (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(
            n, "little")
    return fin, opcode, data


def connect_broker(mqtt_cfg: dict, timeout: float = 10.0) -> socket.socket:
    """TCP (TLS when ``[mqtt] tls``) connection to ``[mqtt] host:port`` as the daemon makes
    it; OSError names the broker."""
    host, port = mqtt_cfg["host"], int(mqtt_cfg["port"])
    try:
        s = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise OSError(f"broker {host}:{port}: {e.strerror or e}") from None
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mqtt_cfg.get("tls"):
        ctx = ssl.create_default_context(cafile=mqtt_cfg.get("ca_file") or None)
        if mqtt_cfg.get("cert_file"):
            ctx.load_cert_chain(mqtt_cfg["cert_file"], mqtt_cfg.get("key_file") or None)
        s = ctx.wrap_socket(s, server_hostname=host)
    s.settimeout(None)
    return s


def serve_websocket(handler, mqtt_cfg: dict) -> None:
    """Run one relayed connection on an ``http.server`` handler that received the upgrade
    request; returns when either side closes."""
    key = handler.headers.get("Sec-WebSocket-Key")
    if not key or "websocket" not in handler.headers.get("Upgrade", "").lower():
        handler.send_error(400, "expected a WebSocket upgrade")
        return
    try:
        broker = connect_broker(mqtt_cfg)
    except OSError as e:
        handler.send_error(502, str(e))
        return
    handler.send_response(101, "Switching Protocols")
    handler.send_header("Upgrade", "websocket")
    handler.send_header("Connection", "Upgrade")
    handler.send_header("Sec-WebSocket-Accept", accept_key(key))
    protos = [p.strip() for p in handler.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    if "mqtt" in protos:
        handler.send_header("Sec-WebSocket-Protocol", "mqtt")
    handler.end_headers()
    handler.wfile.flush()
    client = handler.connection
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    wlock = threading.Lock()
    closed = threading.Event()

    def send(opcode, payload):
        with wlock:
            client.sendall(frame(opcode, payload))

    def broker_to_page():
        try:
            while not closed.is_set():
                data = broker.recv(65536)
                if not data:
                    break
                send(0x2, data)
        except OSError:
            pass
        finally:
            closed.set()
            try:
                send(0x8, struct.pack("!H", 1000))
            except OSError:
                pass
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    t = threading.Thread(target=broker_to_page, name="vsense-relay", daemon=True)
    t.start()
    try:
        while not closed.is_set():
            _, op, data = read_frame(handler.rfile)
            if op in (0x0, 0x1, 0x2):
                broker.sendall(data)
            elif op == 0x8:
                break
            elif op == 0x9:
                send(0xA, data)
    except (EOFError, OSError):
        pass
    except ValueError as e:
        log.warning("dashboard relay: %s; closing", e)
        try:
            send(0x8, struct.pack("!H", 1009 if "bytes" in str(e) else 1002))
        except OSError:
            pass
    finally:
        closed.set()
        try:
            broker.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        broker.close()
        t.join(5)
        handler.close_connection = True
