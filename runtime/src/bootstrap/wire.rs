//! Framing of the bootstrap's TCP messages, and their payloads.
//!
//! A frame is a 20-byte header then `len` payload bytes:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `RSHB` (a stray client or a wrong port fails here, not deep in a parse) |
//! | 4 | [`Kind`] |
//! | 5..8 | zero |
//! | 8..12 | sequence number of the collective (little endian `u32`, wraps) |
//! | 12..20 | payload length (little endian `u64`) |
//!
//! Payloads are serde values in postcard's format ([`encode`], [`decode`]): compact (varint
//! integers), and a decoder that fails, never panics or over-allocates, on any bytes.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Version of the handshake and message formats; a peer with another one is refused.
/// Version 2 added [`Kind::ACCEPTED`]; version 3 encodes payloads with postcard (its varint of
/// the version is the first byte of a hello, which a version-2 peer's little-endian `2` reads as
/// too, so the mismatch is reported as one); version 4 answers PE 0's [`Kind::CHALLENGE`] with a
/// proof of the secret in the hello instead of the secret itself; version 5 opens with a
/// preface (the challenge, PE 0's PE count, job identity and secret socket) and adds the job
/// identity to the hello.
pub(crate) const PROTOCOL_VERSION: u32 = 5;

/// Longest hello PE 0 reads (its fields take about 200 bytes): a longer announced length drops
/// the connection before anything is read, so a stranger cannot make PE 0 allocate.
pub(crate) const MAX_HELLO: usize = 4096;

const MAGIC: [u8; 4] = *b"RSHB";

/// Size of a frame header.
pub(crate) const HEADER_LEN: usize = 20;

/// Payloads at most this long are copied behind the header and sent with one write (one TCP
/// segment for small collectives); longer ones go out as two writes to avoid the copy.
const COALESCE_LIMIT: usize = 64 << 10;

/// Payload buffers grow at most this much ahead of the bytes actually received, so a garbage
/// length field cannot make us allocate gigabytes up front.
const GROW_STEP: usize = 1 << 20;

/// What a frame carries. A `u8` newtype with named values, so unknown values read from the
/// network stay representable and get reported instead of panicking.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Kind(pub(crate) u8);

impl Kind {
    /// Client to PE 0: secret, rank, nranks, pid, host identity.
    pub(crate) const HELLO: Kind = Kind(1);
    /// PE 0 to client: the connection is refused; payload is the reason (UTF-8).
    pub(crate) const REFUSE: Kind = Kind(2);
    /// PE 0 to client: every PE arrived; payload is the table of all PEs.
    pub(crate) const WELCOME: Kind = Kind(3);
    /// PE 0 to client: PE 0 gave up on the job (e.g. a rank never arrived); payload is why.
    pub(crate) const ABORT: Kind = Kind(4);
    /// PE 0 to client: the hello was good and the rank is taken; the table follows once every
    /// PE is there. A connection closed before this was dropped unread (PE 0 drops connections
    /// that crowd it), so the client connects again; one closed after it means PE 0 is gone.
    pub(crate) const ACCEPTED: Kind = Kind(5);
    /// PE 0 to a connecting PE, before anything else: the preface (`rendezvous::Preface`) with a
    /// fresh nonce that the hello's proof of the secret covers (`uid::hello_proof`).
    pub(crate) const CHALLENGE: Kind = Kind(6);
    /// Allgather contribution (to PE 0) or result (from PE 0).
    pub(crate) const ALLGATHER: Kind = Kind(10);
    /// Broadcast data, to PE 0 from the root or from PE 0 to the others.
    pub(crate) const BROADCAST: Kind = Kind(11);
    /// Barrier arrival (to PE 0) or release (from PE 0).
    pub(crate) const BARRIER: Kind = Kind(12);
    /// PE 0 to client: the PE in the payload (`u32`) died.
    pub(crate) const DEAD: Kind = Kind(20);
    /// Either way: this side is finalizing; the end-of-file that follows is not a death.
    pub(crate) const GOODBYE: Kind = Kind(21);
    /// Either way: the job ends now with the exit status in the payload (`i32`): a PE called
    /// `global_exit`; PE 0 relays it to every other PE.
    pub(crate) const EXIT: Kind = Kind(22);
    /// A PE leaves the job (its finalize started): payload `(pe: u32, how: String)`. To PE 0
    /// from the leaving PE, and from PE 0 to every other PE. It is also the finalize's arrival:
    /// no barrier, wait or collective of a program can match it.
    pub(crate) const LEAVING: Kind = Kind(23);
    /// PE 0 to every PE: every PE has left (or died), finalize may tear down.
    pub(crate) const RELEASE: Kind = Kind(24);

    /// A name for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::HELLO => "hello",
            Kind::REFUSE => "refuse",
            Kind::WELCOME => "welcome",
            Kind::ABORT => "abort",
            Kind::ACCEPTED => "accepted",
            Kind::CHALLENGE => "challenge",
            Kind::ALLGATHER => "allgather",
            Kind::BROADCAST => "broadcast",
            Kind::BARRIER => "barrier",
            Kind::DEAD => "peer-died notice",
            Kind::GOODBYE => "goodbye",
            Kind::EXIT => "global exit",
            Kind::LEAVING => "leaving notice",
            Kind::RELEASE => "finalize release",
            _ => "unknown message",
        }
    }
}

/// One received message.
#[derive(Debug)]
pub(crate) struct Frame {
    /// What it is.
    pub(crate) kind: Kind,
    /// Collective sequence number (0 for handshake and control messages).
    pub(crate) seq: u32,
    /// The payload.
    pub(crate) payload: Vec<u8>,
}

/// Why reading a frame stopped.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection at a frame boundary.
    Eof,
    /// The deadline passed.
    Timeout,
    /// The bytes are not an rshmem frame.
    Garbage(String),
    /// The socket failed (including end-of-file inside a frame).
    Io(io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Eof => write!(f, "the connection was closed"),
            ReadError::Timeout => write!(f, "nothing arrived in time"),
            ReadError::Garbage(why) => write!(f, "not an rshmem bootstrap message ({why})"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

fn header(kind: Kind, seq: u32, len: usize) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..4].copy_from_slice(&MAGIC);
    h[4] = kind.0;
    h[8..12].copy_from_slice(&seq.to_le_bytes());
    h[12..20].copy_from_slice(&(len as u64).to_le_bytes());
    h
}

fn parse_header(h: &[u8; HEADER_LEN]) -> Result<(Kind, u32, u64), ReadError> {
    if h[..4] != MAGIC {
        return Err(ReadError::Garbage(format!("bad magic {:02x?}", &h[..4])));
    }
    if h[5..8] != [0, 0, 0] {
        return Err(ReadError::Garbage(format!(
            "reserved bytes {:02x?} are not zero",
            &h[5..8]
        )));
    }
    let seq = u32::from_le_bytes(h[8..12].try_into().unwrap_or_default());
    let len = u64::from_le_bytes(h[12..20].try_into().unwrap_or_default());
    Ok((Kind(h[4]), seq, len))
}

/// How many bytes the hello whose first bytes are `buf` takes (for [`super::pending::Pending`]):
/// a header, then at most [`MAX_HELLO`] payload bytes.
///
/// # Errors
/// Why the bytes cannot begin a hello (bad magic, another kind, a length above [`MAX_HELLO`]).
pub(crate) fn hello_need(buf: &[u8]) -> Result<super::pending::Need, String> {
    use super::pending::Need;
    let Some(h) = buf.get(..HEADER_LEN) else { return Ok(Need::Total(HEADER_LEN)) };
    let h: &[u8; HEADER_LEN] = h.try_into().map_err(|_| "short header".to_string())?;
    let (kind, _, len) = parse_header(h).map_err(|e| e.to_string())?;
    if kind != Kind::HELLO {
        return Err(format!("its first message is a {} (kind {}), not a hello", kind.name(), kind.0));
    }
    if len > MAX_HELLO as u64 {
        return Err(format!("its hello announces {len} bytes, more than the {MAX_HELLO} a hello may have"));
    }
    let total = HEADER_LEN + len as usize;
    Ok(if buf.len() >= total { Need::Done } else { Need::Total(total) })
}

/// Splits a complete frame (header and payload, nothing more) into its parts.
///
/// # Errors
/// Why the bytes are not exactly one frame.
pub(crate) fn split_frame(buf: &[u8]) -> Result<Frame, String> {
    let h: &[u8; HEADER_LEN] = buf
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| format!("{} bytes are shorter than a frame header", buf.len()))?;
    let (kind, seq, len) = parse_header(h).map_err(|e| e.to_string())?;
    if buf.len() as u64 - HEADER_LEN as u64 != len {
        return Err(format!("the header announces {len} payload bytes, {} came", buf.len() - HEADER_LEN));
    }
    Ok(Frame { kind, seq, payload: buf[HEADER_LEN..].to_vec() })
}

/// Writes one frame.
pub(crate) fn write_frame(
    w: &mut impl Write,
    kind: Kind,
    seq: u32,
    payload: &[u8],
) -> io::Result<()> {
    let h = header(kind, seq, payload.len());
    if payload.len() <= COALESCE_LIMIT {
        let mut buf = Vec::with_capacity(HEADER_LEN + payload.len());
        buf.extend_from_slice(&h);
        buf.extend_from_slice(payload);
        w.write_all(&buf)?;
    } else {
        w.write_all(&h)?;
        w.write_all(payload)?;
    }
    w.flush()
}

/// Reads one frame, blocking as long as it takes (the watcher threads: they are woken by
/// `shutdown` of the socket, not by a timeout).
pub(crate) fn read_frame(r: &mut impl Read) -> Result<Frame, ReadError> {
    let mut h = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut h[got..]) {
            Ok(0) if got == 0 => return Err(ReadError::Eof),
            Ok(0) => return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    let (kind, seq, len) = parse_header(&h)?;
    let mut payload = Vec::new();
    let read = r
        .take(len)
        .read_to_end(&mut payload)
        .map_err(ReadError::Io)?;
    if (read as u64) < len {
        return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(Frame { kind, seq, payload })
}

/// Reads one frame, giving up at `deadline` (the handshake, where no watcher runs yet).
///
/// Reads in slices of at most one second so that a partial frame is never lost to a timeout
/// (`read_exact` would drop what it had read).
pub(crate) fn read_frame_until(s: &mut TcpStream, deadline: Instant) -> Result<Frame, ReadError> {
    let mut h = [0u8; HEADER_LEN];
    if !fill(s, &mut h, deadline, true)? {
        return Err(ReadError::Eof);
    }
    let (kind, seq, len) = parse_header(&h)?;
    let len = usize::try_from(len).map_err(|_| ReadError::Garbage(format!("length {len}")))?;
    let mut payload = Vec::new();
    while payload.len() < len {
        let start = payload.len();
        payload.resize(start + (len - start).min(GROW_STEP), 0);
        fill(s, &mut payload[start..], deadline, false)?;
    }
    // Leave the socket blocking without a timeout for whoever uses it next.
    s.set_read_timeout(None).map_err(ReadError::Io)?;
    Ok(Frame { kind, seq, payload })
}

/// Fills `buf`; returns `Ok(false)` on end-of-file before the first byte when `eof_ok`.
fn fill(
    s: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
    eof_ok: bool,
) -> Result<bool, ReadError> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Timeout);
        }
        s.set_read_timeout(Some(left.min(Duration::from_secs(1))))
            .map_err(ReadError::Io)?;
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 && eof_ok => return Ok(false),
            Ok(0) => return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    Ok(true)
}

/// A payload: `value` in postcard's format.
pub(crate) fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Vec<u8> {
    // Serializing into a growable buffer fails only for types serde cannot express in postcard
    // (none of ours: structs of integers, strings and byte strings).
    postcard::to_allocvec(value).unwrap_or_else(|e| unreachable!("postcard cannot encode a bootstrap message: {e}"))
}

/// The `what` value in `payload`, which must hold nothing else.
///
/// # Errors
/// Why the bytes are not one such value (short, malformed, or with bytes left over).
pub(crate) fn decode<'a, T: serde::Deserialize<'a>>(payload: &'a [u8], what: &str) -> Result<T, String> {
    let (value, rest) = postcard::take_from_bytes(payload).map_err(|e| format!("a malformed {what}: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("a {what} with {} unexpected trailing bytes", rest.len()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_back_to_back() {
        let big = vec![7u8; COALESCE_LIMIT + 5];
        let mut buf = Vec::new();
        write_frame(&mut buf, Kind::ALLGATHER, 9, b"abc").unwrap();
        write_frame(&mut buf, Kind::BARRIER, u32::MAX, b"").unwrap();
        write_frame(&mut buf, Kind::BROADCAST, 1, &big).unwrap();
        let mut r = &buf[..];
        let f = read_frame(&mut r).unwrap();
        assert_eq!(
            (f.kind, f.seq, f.payload.as_slice()),
            (Kind::ALLGATHER, 9, &b"abc"[..])
        );
        let f = read_frame(&mut r).unwrap();
        assert_eq!(
            (f.kind, f.seq, f.payload.len()),
            (Kind::BARRIER, u32::MAX, 0)
        );
        let f = read_frame(&mut r).unwrap();
        assert_eq!((f.kind, f.payload), (Kind::BROADCAST, big));
        assert!(matches!(read_frame(&mut r), Err(ReadError::Eof)));
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        let mut r = &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..];
        assert!(matches!(read_frame(&mut r), Err(ReadError::Garbage(_))));
        let mut buf = Vec::new();
        write_frame(&mut buf, Kind::ALLGATHER, 1, b"hello").unwrap();
        for cut in 1..buf.len() {
            let mut r = &buf[..cut];
            assert!(
                matches!(read_frame(&mut r), Err(ReadError::Io(_))),
                "cut at {cut}"
            );
        }
        // A huge length with no bytes behind it ends in EOF, not in a huge allocation.
        let mut r = &header(Kind::ALLGATHER, 0, usize::MAX >> 1)[..];
        assert!(matches!(read_frame(&mut r), Err(ReadError::Io(_))));
    }

    #[test]
    fn deadline_read_over_tcp() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let t0 = Instant::now();
        let r = read_frame_until(&mut s, t0 + Duration::from_millis(200));
        assert!(matches!(r, Err(ReadError::Timeout)));
        assert!(t0.elapsed() >= Duration::from_millis(200));
        write_frame(&mut c, Kind::HELLO, 0, &[1, 2, 3]).unwrap();
        let f = read_frame_until(&mut s, Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!((f.kind, f.payload), (Kind::HELLO, vec![1, 2, 3]));
        drop(c);
        assert!(matches!(
            read_frame_until(&mut s, Instant::now() + Duration::from_secs(5)),
            Err(ReadError::Eof)
        ));
    }

    #[test]
    fn payloads_reject_short_trailing_and_huge_lengths() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct Sample {
            n: u32,
            host: String,
            #[serde(with = "serde_bytes")]
            blob: Vec<u8>,
            big: u64,
        }
        let v = Sample { n: 5, host: "host".into(), blob: vec![9; 3], big: 1 << 40 };
        let bytes = encode(&v);
        assert_eq!(decode::<Sample>(&bytes, "sample").unwrap(), v);
        assert!(decode::<Sample>(&bytes[..4], "sample").unwrap_err().contains("malformed sample"));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode::<Sample>(&longer, "sample").unwrap_err().contains("1 unexpected trailing"));
        // A byte string announcing 2^63 bytes with none behind it: an error, no allocation.
        let mut huge = encode(&5u32);
        huge.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(decode::<(u32, serde_bytes::ByteBuf)>(&huge, "blob").is_err());
    }
}
