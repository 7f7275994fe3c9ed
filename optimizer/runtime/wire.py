"""The split transport: length-prefixed binary frames with a versioned header (little-endian).

::

    frame   = length:u32  header  body  [tag]         (length = bytes after the length field)
    header  = magic "DNNP"  version:u8  type:u8  flags:u16  request_id:u64  count:u16   (18 B)
    body    = count x tensor                          (type REQUEST, RESPONSE or HELLO)
            | code:u16  msg_len:u16  msg:utf-8        (type ERROR, count = 0)
    tensor  = name_len:u16 name:utf-8 dtype:u8 ndim:u8 dims:ndim x u32 nbytes:u64 data
    tag     = HMAC-SHA256(key, header body)           (32 B, when flags has SIGNED)

Version 2 added the ``SIGNED`` flag and its tag (RFC 2104 HMAC with SHA-256, compared in constant
time). Version 3 binds signatures to the connection, so that a recorded frame cannot be replayed:
with a shared token (``--token-file``) a connection begins with a HELLO exchange of fresh random
nonces, signed with the token, and every later frame on it is signed with the session key
HMAC-SHA256(token, "dnnplan-session" || client nonce || server nonce); request ids must increase
on a connection. Without a token nothing changes: version-1 and version-2 frames are read
unchanged and an endpoint answers in the version it was asked in. ``docs/MANIFEST.md`` is the
normative description; the manifest's ``wire`` section gives the tensors a request must carry and
the largest frame a server accepts.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError, DnnplanError, InputFileError

MAGIC = b"DNNP"
VERSION = 3
VERSIONS = (1, 2, 3)  # read; version 1 is version 2 without flags, version 3 adds HELLO (sessions)
SESSION_VERSION = 3  # the first version with the HELLO exchange
SIGNED = 0x0001  # flags: a 32-byte HMAC-SHA256 tag ends the frame
TAG_BYTES = 32
MIN_TOKEN_BYTES = 16
NONCE_BYTES = 16
CLIENT_NONCE, SERVER_NONCE = "client_nonce", "server_nonce"
SESSION_LABEL = b"dnnplan-session"
REQUEST, RESPONSE, ERROR, HELLO = 1, 2, 3, 4
MESSAGE_TYPES = {REQUEST: "request", RESPONSE: "response", ERROR: "error", HELLO: "hello"}
HEADER = struct.Struct("<4sBBHQH")
LENGTH = struct.Struct("<I")
TENSOR_HEAD = struct.Struct("<BB")
NBYTES = struct.Struct("<Q")
ERROR_HEAD = struct.Struct("<HH")
MAX_NDIM = 8
MAX_NAME = 1024

DTYPE_CODES: dict[str, int] = {"float32": 1, "float16": 2, "int8": 3, "uint8": 4, "int16": 5,
                               "int32": 6, "int64": 7, "bool": 8}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}

# error codes of ERROR frames
(E_MAGIC, E_VERSION, E_TYPE, E_MALFORMED, E_TENSOR, E_TOO_LARGE, E_INTERNAL, E_BUSY, E_UNAUTHORIZED,
 E_DEADLINE) = range(1, 11)
ERROR_NAMES = {E_MAGIC: "bad_magic", E_VERSION: "bad_version", E_TYPE: "bad_type",
               E_MALFORMED: "malformed", E_TENSOR: "bad_tensor", E_TOO_LARGE: "too_large",
               E_INTERNAL: "internal", E_BUSY: "busy", E_UNAUTHORIZED: "unauthorized",
               E_DEADLINE: "deadline"}


class WireError(DnnplanError):
    """A frame violates the protocol; ``code`` is the ERROR frame's code."""

    def __init__(self, code: int, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.code, self.request_id = code, request_id


@dataclass
class Frame:
    type: int
    request_id: int
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    error_code: int = 0
    error: str = ""
    version: int = VERSION

    @property
    def error_text(self) -> str:
        """An ERROR frame's code name and message, as ``name: message``."""
        return f"{ERROR_NAMES.get(self.error_code, self.error_code)}: {self.error}"


def read_token(path: str | os.PathLike[str]) -> bytes:
    """The shared token of ``--token-file`` (the file's bytes, surrounding whitespace removed)."""
    p = Path(path)
    try:
        token = p.read_bytes().strip()
    except OSError as exc:
        raise InputFileError(f"--token-file {p}: cannot read it ({exc.strerror or exc})") from None
    if len(token) < MIN_TOKEN_BYTES:
        raise ConfigError(f"--token-file {p}: the token has {len(token)} bytes; give at least {MIN_TOKEN_BYTES} "
                          "random ones, e.g. 'head -c 32 /dev/urandom | base64 > FILE'")
    return token


def new_nonce() -> bytes:
    """A fresh random nonce for the HELLO exchange (the OS's CSPRNG)."""
    return os.urandom(NONCE_BYTES)


def session_key(token: bytes, client_nonce: bytes, server_nonce: bytes) -> bytes:
    """The key every frame after the HELLO exchange is signed with (module docstring): a
    connection's frames do not verify on another connection, whose nonces differ."""
    return hmac.new(token, SESSION_LABEL + client_nonce + server_nonce, hashlib.sha256).digest()


def hello_nonces(frame: Frame, *names: str) -> list[bytes]:
    """The nonces ``names`` a HELLO frame carries, each ``NONCE_BYTES`` of uint8; raises
    :class:`WireError` (``malformed``) otherwise."""
    if frame.type != HELLO or set(frame.tensors) != set(names):
        raise WireError(E_MALFORMED, f"expected a hello frame carrying {', '.join(names)}; got a "
                                     f"{MESSAGE_TYPES.get(frame.type, frame.type)} frame with "
                                     f"{sorted(frame.tensors)}", frame.request_id)
    out = []
    for name in names:
        a = frame.tensors[name]
        if a.dtype != np.uint8 or a.shape != (NONCE_BYTES,):
            raise WireError(E_MALFORMED, f"hello tensor {name!r}: got {a.dtype.name}{list(a.shape)}, "
                                         f"expected uint8[{NONCE_BYTES}]", frame.request_id)
        out.append(a.tobytes())
    return out


def encode_hello(request_id: int, nonces: dict[str, bytes], token: bytes) -> bytes:
    """A HELLO frame carrying ``nonces`` (name -> bytes), signed with the shared ``token``."""
    return encode(HELLO, request_id, {k: np.frombuffer(v, np.uint8) for k, v in nonces.items()}, token=token,
                  version=SESSION_VERSION)


def _tag(token: bytes, signed: bytes | memoryview) -> bytes:
    return hmac.new(token, signed, hashlib.sha256).digest()


def _frame(head: bytes, body: bytes, token: bytes | None) -> bytes:
    """Length prefix, header, body and (with a token) the HMAC tag of header and body."""
    tag = _tag(token, head + body) if token is not None else b""
    return LENGTH.pack(len(head) + len(body) + len(tag)) + head + body + tag


def _head(type_: int, request_id: int, count: int, token: bytes | None, version: int) -> bytes:
    if token is not None and version < 2:
        version = 2  # signing needs version 2
    return HEADER.pack(MAGIC, version, type_, SIGNED if token is not None else 0, request_id, count)


def encode(type_: int, request_id: int, tensors: dict[str, np.ndarray] | None = None, *,
           token: bytes | None = None, version: int = VERSION) -> bytes:
    """A complete frame (length prefix included) carrying ``tensors`` in the given order; signed
    with ``token`` when one is given."""
    parts = []
    tensors = tensors or {}
    for name, arr in tensors.items():
        a = np.asarray(arr)
        if not a.flags.c_contiguous:  # not ascontiguousarray: it turns a scalar (0-d) into shape [1]
            a = a.copy(order="C")
        code = DTYPE_CODES.get(a.dtype.name)
        if code is None:
            raise WireError(E_TENSOR, f"tensor {name!r}: dtype {a.dtype} has no wire code")
        nb = name.encode("utf-8")
        parts += [struct.pack("<H", len(nb)), nb, TENSOR_HEAD.pack(code, a.ndim),
                  struct.pack(f"<{a.ndim}I", *a.shape), NBYTES.pack(a.nbytes), a.tobytes()]
    return _frame(_head(type_, request_id, len(tensors), token, version), b"".join(parts), token)


def encode_error(request_id: int, code: int, message: str, *, token: bytes | None = None,
                 version: int = VERSION) -> bytes:
    msg = message.encode("utf-8")[:4000]
    return _frame(_head(ERROR, request_id, 0, token, version), ERROR_HEAD.pack(code, len(msg)) + msg, token)


def decode(payload: bytes | memoryview, max_tensors: int = 64, token: bytes | None = None) -> Frame:
    """Parse a frame's bytes after the length field; raises :class:`WireError`.

    With a ``token`` the frame must be signed with it (its tag is checked in constant time before
    anything else is read); without one it must not be signed (the two ends disagree)."""
    mv = memoryview(payload)
    if len(mv) < HEADER.size:
        raise WireError(E_MALFORMED, f"frame of {len(mv)} bytes is shorter than the {HEADER.size}-byte header")
    magic, version, type_, flags, rid, count = HEADER.unpack_from(mv, 0)
    if magic != MAGIC:
        raise WireError(E_MAGIC, f"bad magic {bytes(magic)!r}; expected {MAGIC!r}")
    if version not in VERSIONS:
        raise WireError(E_VERSION, f"protocol version {version} is not supported; this end speaks versions "
                                   f"{', '.join(map(str, VERSIONS))}", rid)
    mv = _authenticated(mv, flags, token, rid)
    if type_ not in MESSAGE_TYPES:
        raise WireError(E_TYPE, f"unknown message type {type_}", rid)
    frame = _decode_body(mv, type_, rid, count, max_tensors)
    frame.version = version
    return frame


def _authenticated(mv: memoryview, flags: int, token: bytes | None, rid: int) -> memoryview:
    """The frame without its tag, after checking it against ``token`` (module docstring)."""
    signed = bool(flags & SIGNED)
    if token is None:
        if signed:
            raise WireError(E_UNAUTHORIZED, "the frame is signed but this end has no token; give both ends "
                                            "the same --token-file", rid)
        return mv
    if not signed:
        raise WireError(E_UNAUTHORIZED, "the frame is not signed; this end requires the shared token "
                                        "(--token-file on both ends)", rid)
    if len(mv) < HEADER.size + TAG_BYTES or not hmac.compare_digest(
            bytes(mv[-TAG_BYTES:]), _tag(token, mv[:-TAG_BYTES])):
        raise WireError(E_UNAUTHORIZED, "the frame's HMAC does not match the shared token", rid)
    return mv[:-TAG_BYTES]


def _decode_body(mv: memoryview, type_: int, rid: int, count: int, max_tensors: int) -> Frame:
    """The message after the header (tag removed)."""
    off = HEADER.size
    if type_ == ERROR:
        if len(mv) < off + ERROR_HEAD.size:
            raise WireError(E_MALFORMED, "truncated error frame", rid)
        code, n = ERROR_HEAD.unpack_from(mv, off)
        msg = bytes(mv[off + ERROR_HEAD.size: off + ERROR_HEAD.size + n]).decode("utf-8", "replace")
        return Frame(ERROR, rid, error_code=code, error=msg)
    if count > max_tensors:
        raise WireError(E_MALFORMED, f"{count} tensors exceed the limit of {max_tensors}", rid)
    tensors: dict[str, np.ndarray] = {}
    try:
        for _ in range(count):
            (nlen,) = struct.unpack_from("<H", mv, off)
            off += 2
            if nlen > MAX_NAME or off + nlen > len(mv):
                raise WireError(E_MALFORMED, f"tensor name length {nlen} runs past the frame", rid)
            name = bytes(mv[off:off + nlen]).decode("utf-8")
            off += nlen
            code, ndim = TENSOR_HEAD.unpack_from(mv, off)
            off += TENSOR_HEAD.size
            if code not in CODE_DTYPES:
                raise WireError(E_TENSOR, f"tensor {name!r}: unknown dtype code {code}", rid)
            if ndim > MAX_NDIM:
                raise WireError(E_TENSOR, f"tensor {name!r}: {ndim} dimensions exceed {MAX_NDIM}", rid)
            shape = struct.unpack_from(f"<{ndim}I", mv, off)
            off += 4 * ndim
            (nbytes,) = NBYTES.unpack_from(mv, off)
            off += NBYTES.size
            dtype = np.dtype(CODE_DTYPES[code])
            expect = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if nbytes != expect:
                raise WireError(E_TENSOR, f"tensor {name!r}: {nbytes} data bytes but shape {list(shape)} "
                                          f"of {dtype.name} needs {expect}", rid)
            if off + nbytes > len(mv):
                raise WireError(E_MALFORMED, f"tensor {name!r}: data runs past the end of the frame", rid)
            if name in tensors:
                raise WireError(E_TENSOR, f"tensor {name!r} appears twice", rid)
            tensors[name] = np.frombuffer(mv[off:off + nbytes], dtype=dtype).reshape(shape)
            off += nbytes
    except struct.error:
        raise WireError(E_MALFORMED, "frame ends inside a tensor header", rid) from None
    except UnicodeDecodeError:
        raise WireError(E_MALFORMED, "tensor name is not UTF-8", rid) from None
    if off != len(mv):
        raise WireError(E_MALFORMED, f"{len(mv) - off} trailing bytes after the last tensor", rid)
    return Frame(type_, rid, tensors)


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """Read exactly ``n`` bytes; None when the peer closes before (a truncated frame)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return None
        got += k
    return bytes(buf)


def read_frame(sock: socket.socket, max_frame_bytes: int) -> bytes | None:
    """The next frame's bytes after the length field; None on a clean or truncated close.

    Raises :class:`WireError` (``E_TOO_LARGE``) for a declared length over the bound, before
    reading it.
    """
    head = recv_exact(sock, LENGTH.size)
    if head is None:
        return None
    (length,) = LENGTH.unpack(head)
    if length > max_frame_bytes:
        raise WireError(E_TOO_LARGE, f"frame of {length} bytes exceeds the limit of {max_frame_bytes}")
    return recv_exact(sock, length)
