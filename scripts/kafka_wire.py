"""The Kafka protocol, as much of it as the benchmarks send themselves:
primitive encoders, a response reader, one blocking connection, and
ListOffsets. Versions are the oldest Kafka 4.x still accepts (KIP-896),
non-flexible where possible."""

import struct
import time

API_VERSIONS, METADATA, CREATE_TOPICS, CREATE_PARTITIONS, LIST_OFFSETS, DESCRIBE_TOPIC_PARTITIONS = 18, 3, 19, 37, 2, 75


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    b = s.encode()
    return i16(len(b)) + b


def array(items, encode):
    return i32(len(items)) + b"".join(encode(x) for x in items)


def uvarint(v):
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def compact_string(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


NO_TAGS = uvarint(0)


def request_frame(api_key, version, correlation_id, body, flexible=False):
    """A size-prefixed request: header v1 (v2 for flexible versions)."""
    header = i16(api_key) + i16(version) + i32(correlation_id) + string("scale-bench")
    if flexible:
        header += NO_TAGS
    message = header + body
    return i32(len(message)) + message


class Reader:
    """Reads one response body, field by field."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def _take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def i8(self):
        return self._take(">b")

    def i16(self):
        return self._take(">h")

    def i32(self):
        return self._take(">i")

    def i64(self):
        return self._take(">q")

    def skip(self, n):
        self.pos += n

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n:self.pos].decode()

    def array(self, read):
        return [read() for _ in range(self.i32())]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n:self.pos].decode()

    def compact_array(self, read):
        n = self.uvarint() - 1
        return None if n < 0 else [read() for _ in range(n)]

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def split_response(frame, flexible_header=False):
    """Correlation id and body reader of a response frame (without size)."""
    r = Reader(frame)
    correlation_id = r.i32()
    if flexible_header:
        r.tags()
    return correlation_id, r


class Connection:
    """One blocking client connection for the measuring requests."""

    def __init__(self, port, timeout=120.0):
        import socket
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.correlation_id = 0
        # Seconds the requests took, from sending to the last byte of the
        # response (not this script's parsing of it).
        self.waited = 0.0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            buf += chunk
        return bytes(buf)

    def call(self, api_key, version, body, flexible=False):
        """Sends one request and returns the reader of its response body."""
        self.correlation_id += 1
        t0 = time.monotonic()
        self.sock.sendall(request_frame(api_key, version, self.correlation_id, body, flexible))
        (size,) = struct.unpack(">i", self._read_exact(4))
        frame = self._read_exact(size)
        self.waited += time.monotonic() - t0
        # ApiVersions answers with header v0 whatever its version.
        correlation_id, r = split_response(frame, flexible and api_key != API_VERSIONS)
        if correlation_id != self.correlation_id:
            raise RuntimeError(f"correlation id {correlation_id}, expected {self.correlation_id}")
        return r


def end_offsets(conn, topic, partitions):
    """ListOffsets v1 (latest) of every partition: {partition: (error, offset)}."""
    body = i32(-1) + array([topic], lambda name: string(name) + array(
        list(range(partitions)), lambda p: i32(p) + i64(-1)))
    r = conn.call(LIST_OFFSETS, 1, body)
    offsets = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            index, error = r.i32(), r.i16()
            r.i64()  # timestamp
            offsets[index] = (error, r.i64())
    return offsets
