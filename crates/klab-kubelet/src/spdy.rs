//! A minimal SPDY/3.1 server session, enough for kubectl's exec/attach (`v4.channel.k8s.io`)
//! and port-forward (`portforward.k8s.io`) streams (kubectl 1.27–1.29 speak nothing else, and
//! newer ones fall back to it).
//!
//! The client opens every stream (SYN_STREAM, with a `streamtype` header, and for port-forward
//! `port` and `requestid`); the server answers each with an empty SYN_REPLY, exchanges DATA
//! frames and ends a stream with the FIN flag. Header blocks are zlib streams, one per direction
//! for the whole session, primed with SPDY/3's preset dictionary. PINGs are echoed; SETTINGS,
//! WINDOW_UPDATE and the like are read and ignored (the Go peer, moby/spdystream, does not
//! enforce flow-control windows either).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::exec::{ERROR, ExecOptions, ExecTarget, STDERR, STDIN, STDOUT, Streams};

const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const FLAG_FIN: u8 = 0x01;
/// Largest frame accepted (a hostile peer must not make the kubelet allocate at will).
const MAX_FRAME: usize = 1 << 20;
/// How long the server waits for the client to open the streams it asked for (upstream: 30 s).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// SPDY/3's header compression dictionary (draft-mbelshe-httpbis-spdy-00 §2.6.10.1): these
/// length-prefixed header names and values, then a run of common value text.
const DICTIONARY_WORDS: [&str; 66] = [
    "options",
    "head",
    "post",
    "put",
    "delete",
    "trace",
    "accept",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "connection",
    "content-base",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-md5",
    "content-range",
    "content-type",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "location",
    "max-forwards",
    "pragma",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "retry-after",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "vary",
    "via",
    "warning",
    "www-authenticate",
    "method",
    "get",
    "status",
    "200 OK",
    "version",
    "HTTP/1.1",
    "url",
    "public",
    "set-cookie",
    "keep-alive",
    "origin",
    "",
];
const DICTIONARY_TEXT: &str = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";

/// The dictionary's bytes (1423 of them).
pub fn dictionary() -> Vec<u8> {
    let mut d = Vec::with_capacity(1423);
    for w in DICTIONARY_WORDS.iter().filter(|w| !w.is_empty()) {
        d.extend_from_slice(&(w.len() as u32).to_be_bytes());
        d.extend_from_slice(w.as_bytes());
    }
    d.extend_from_slice(DICTIONARY_TEXT.as_bytes());
    d
}

/// Something the client sent.
#[derive(Debug)]
pub enum Event {
    /// A new stream with its headers (names lower-case).
    Open {
        id: u32,
        headers: BTreeMap<String, String>,
        fin: bool,
    },
    Data {
        id: u32,
        data: Bytes,
        fin: bool,
    },
    Reset {
        id: u32,
    },
    /// The client went away (GOAWAY, connection closed, or a protocol error).
    Closed,
}

/// The header-block codec of one session.
struct Codec {
    deflate: Compress,
    inflate: Decompress,
    dict: Vec<u8>,
}

impl Codec {
    fn new() -> Codec {
        let dict = dictionary();
        let mut deflate = Compress::new(Compression::default(), true);
        let _ = deflate.set_dictionary(&dict);
        Codec {
            deflate,
            inflate: Decompress::new(true),
            dict,
        }
    }

    fn compress(&mut self, headers: &[(&str, &str)]) -> Vec<u8> {
        let mut raw = Vec::new();
        raw.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        for (k, v) in headers {
            raw.extend_from_slice(&(k.len() as u32).to_be_bytes());
            raw.extend_from_slice(k.as_bytes());
            raw.extend_from_slice(&(v.len() as u32).to_be_bytes());
            raw.extend_from_slice(v.as_bytes());
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut input = &raw[..];
        loop {
            let before = self.deflate.total_in();
            out.reserve(256);
            if self
                .deflate
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .is_err()
            {
                break;
            }
            let used = (self.deflate.total_in() - before) as usize;
            input = &input[used.min(input.len())..];
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
        out
    }

    fn decompress(&mut self, block: &[u8]) -> Option<BTreeMap<String, String>> {
        let mut out: Vec<u8> = Vec::with_capacity(4096);
        let mut input = block;
        let mut rounds = 0;
        while !input.is_empty() || out.len() == out.capacity() {
            rounds += 1;
            if rounds > 4096 || out.len() > MAX_FRAME {
                return None;
            }
            out.reserve(4096);
            let before = self.inflate.total_in();
            let r = self
                .inflate
                .decompress_vec(input, &mut out, FlushDecompress::Sync);
            let used = (self.inflate.total_in() - before) as usize;
            input = &input[used.min(input.len())..];
            match r {
                Ok(_) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.inflate.set_dictionary(&self.dict).ok()?;
                }
                Err(_) => return None,
            }
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
        }
        parse_headers(&out)
    }
}

fn parse_headers(b: &[u8]) -> Option<BTreeMap<String, String>> {
    let mut pos = 0;
    let u32_at = |pos: &mut usize| -> Option<usize> {
        let v = b.get(*pos..*pos + 4)?;
        *pos += 4;
        Some(u32::from_be_bytes([v[0], v[1], v[2], v[3]]) as usize)
    };
    let n = u32_at(&mut pos)?;
    let mut h = BTreeMap::new();
    for _ in 0..n.min(1024) {
        let kl = u32_at(&mut pos)?;
        let k = b.get(pos..pos.checked_add(kl)?)?;
        pos += kl;
        let vl = u32_at(&mut pos)?;
        let v = b.get(pos..pos.checked_add(vl)?)?;
        pos += vl;
        h.insert(
            String::from_utf8_lossy(k).to_ascii_lowercase(),
            String::from_utf8_lossy(v).into_owned(),
        );
    }
    Some(h)
}

fn control(kind: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + payload.len());
    f.extend_from_slice(&[0x80, 0x03]);
    f.extend_from_slice(&kind.to_be_bytes());
    f.push(flags);
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    f.extend_from_slice(payload);
    f
}

fn data_frame(id: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + data.len());
    f.extend_from_slice(&(id & 0x7fff_ffff).to_be_bytes());
    f.push(flags);
    f.extend_from_slice(&(data.len() as u32).to_be_bytes()[1..]);
    f.extend_from_slice(data);
    f
}

/// The writing half of a session.
pub struct Writer<W> {
    w: W,
    codec: Codec,
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    pub async fn reply(&mut self, id: u32) -> std::io::Result<()> {
        let block = self.codec.compress(&[]);
        let mut p = (id & 0x7fff_ffff).to_be_bytes().to_vec();
        p.extend_from_slice(&block);
        self.w.write_all(&control(SYN_REPLY, 0, &p)).await
    }

    /// Sends `data` on a stream, in frames of at most 32 KiB.
    pub async fn data(&mut self, id: u32, data: &[u8]) -> std::io::Result<()> {
        for chunk in data.chunks(32 * 1024) {
            self.w.write_all(&data_frame(id, 0, chunk)).await?;
        }
        Ok(())
    }

    /// Ends the server's side of a stream.
    pub async fn fin(&mut self, id: u32) -> std::io::Result<()> {
        self.w.write_all(&data_frame(id, FLAG_FIN, &[])).await
    }

    pub async fn goaway(&mut self, last: u32) -> std::io::Result<()> {
        let mut p = (last & 0x7fff_ffff).to_be_bytes().to_vec();
        p.extend_from_slice(&0u32.to_be_bytes());
        self.w.write_all(&control(GOAWAY, 0, &p)).await?;
        self.w.flush().await
    }

    async fn raw(&mut self, frame: &[u8]) -> std::io::Result<()> {
        self.w.write_all(frame).await
    }
}

/// Reads frames into events until the connection ends. PINGs are handed to `pong` to echo.
async fn read_loop<R: AsyncRead + Unpin>(
    mut r: R,
    events: mpsc::UnboundedSender<Event>,
    pong: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut codec = Codec::new();
    loop {
        let mut head = [0u8; 8];
        if r.read_exact(&mut head).await.is_err() {
            break;
        }
        let len = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
        let flags = head[4];
        if len > MAX_FRAME {
            break;
        }
        let mut payload = vec![0u8; len];
        if r.read_exact(&mut payload).await.is_err() {
            break;
        }
        let fin = flags & FLAG_FIN != 0;
        if head[0] & 0x80 == 0 {
            let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7fff_ffff;
            let _ = events.send(Event::Data {
                id,
                data: Bytes::from(payload),
                fin,
            });
            continue;
        }
        let kind = u16::from_be_bytes([head[2], head[3]]);
        let id = payload
            .get(..4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff)
            .unwrap_or(0);
        match kind {
            SYN_STREAM => {
                let Some(headers) = payload.get(10..).and_then(|b| codec.decompress(b)) else {
                    break;
                };
                let _ = events.send(Event::Open { id, headers, fin });
            }
            RST_STREAM => {
                let _ = events.send(Event::Reset { id });
            }
            PING => {
                let _ = pong.send(control(PING, 0, &payload));
            }
            GOAWAY => break,
            _ => {}
        }
    }
    let _ = events.send(Event::Closed);
}

/// A served SPDY connection: events from the client and the writer for answers.
pub struct Session<W> {
    pub events: mpsc::UnboundedReceiver<Event>,
    pongs: mpsc::UnboundedReceiver<Vec<u8>>,
    pub writer: Writer<W>,
    /// The task reading the connection: it owns the read half, so the connection closes only
    /// when it stops too; a dropped session (a stopped kubelet, an ended exec) aborts it.
    _reader: AbortOnDrop,
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<W: AsyncWrite + Unpin> Session<W> {
    /// The next client event; PINGs are answered on the way.
    pub async fn next(&mut self) -> Event {
        loop {
            tokio::select! {
                biased;
                Some(p) = self.pongs.recv() => {
                    if self.writer.raw(&p).await.is_err() {
                        return Event::Closed;
                    }
                }
                e = self.events.recv() => return e.unwrap_or(Event::Closed),
            }
        }
    }
}

/// Starts serving SPDY on an upgraded connection.
pub fn session<IO>(io: IO) -> Session<tokio::io::WriteHalf<IO>>
where
    IO: AsyncRead + AsyncWrite + Send + 'static,
{
    let (r, w) = tokio::io::split(io);
    let (tx, events) = mpsc::unbounded_channel();
    let (ptx, pongs) = mpsc::unbounded_channel();
    let reader = AbortOnDrop(tokio::spawn(read_loop(r, tx, ptx)));
    Session {
        events,
        pongs,
        writer: Writer {
            w,
            codec: Codec::new(),
        },
        _reader: reader,
    }
}

/// The WebSocket subprotocol of kubectl's port-forward tunnel.
pub const TUNNEL_PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";

/// A byte stream over a WebSocket whose binary messages carry it (kubectl's
/// `TunnelingConnection`): the SPDY session reads and writes the returned end.
pub fn tunnel(ws: axum::extract::ws::WebSocket) -> tokio::io::DuplexStream {
    use axum::extract::ws::Message;
    use futures::{SinkExt, StreamExt};
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (mut rd, mut wr) = tokio::io::split(ours);
    let (mut sink, mut stream) = ws.split();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            tokio::select! {
                biased;
                n = rd.read(&mut buf) => match n {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let msg = Message::Binary(Bytes::copy_from_slice(&buf[..n]));
                        if sink.send(msg).await.is_err() {
                            break;
                        }
                    }
                },
                msg = stream.next() => match msg {
                    Some(Ok(Message::Binary(b))) => {
                        if wr.write_all(&b).await.is_err() {
                            break;
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                },
            }
        }
        let _ = sink.send(Message::Close(None)).await;
    });
    theirs
}

/// Values of a possibly repeated, comma-separated request header.
pub fn header_values(headers: &http::HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .filter(|p| !p.is_empty())
        .collect()
}

/// Answers a SPDY/3.1 upgrade offering `protocol` in `X-Stream-Protocol-Version`, and serves
/// the session with `serve` once the connection is switched (until `cut`).
pub fn upgrade<F, Fut>(
    mut req: axum::extract::Request,
    protocol: &'static str,
    cut: impl std::future::Future<Output = ()> + Send + 'static,
    serve: F,
) -> axum::response::Response
where
    F: FnOnce(
            Session<tokio::io::WriteHalf<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>>,
        ) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let offered = header_values(req.headers(), "x-stream-protocol-version");
    if !offered.iter().any(|p| p == protocol) {
        return (
            StatusCode::FORBIDDEN,
            // Go's `%v` of the two lists (httpstream.Handshake), and the versions the server
            // accepts in a header, as upstream answers.
            [("X-Accepted-Stream-Protocol-Versions", protocol)],
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports [{}], server accepts [{protocol}]",
                offered.join(" ")
            ),
        )
            .into_response();
    }
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(io) = on_upgrade.await else {
            return;
        };
        let io = hyper_util::rt::TokioIo::new(io);
        tokio::select! {
            biased;
            _ = cut => {}
            _ = serve(session(io)) => {}
        }
    });
    axum::response::Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "SPDY/3.1")
        .header("X-Stream-Protocol-Version", protocol)
        .body(axum::body::Body::empty())
        .unwrap_or_default()
}

/// Answers an exec/attach SPDY upgrade (`v4.channel.k8s.io`).
pub fn exec_upgrade(
    req: axum::extract::Request,
    target: ExecTarget,
    opts: ExecOptions,
    cut: impl std::future::Future<Output = ()> + Send + 'static,
) -> axum::response::Response {
    upgrade(req, "v4.channel.k8s.io", cut, move |s| {
        exec_session(s, target, opts)
    })
}

async fn exec_session<W: AsyncWrite + Unpin>(
    mut s: Session<W>,
    target: ExecTarget,
    opts: ExecOptions,
) {
    let _open = crate::server::StreamGuard::new(&target.endpoint.open_streams);
    let clock = target.endpoint.clock.clone();
    // The streams the client must open before the command runs.
    let mut want: Vec<&str> = vec!["error"];
    if opts.stdin {
        want.push("stdin");
    }
    if opts.stdout {
        want.push("stdout");
    }
    if opts.stderr && !opts.tty {
        want.push("stderr");
    }
    let mut ids: BTreeMap<String, u32> = BTreeMap::new();
    let mut stdin_fin = false;
    let deadline = klab_api::clock::saturating_add(clock.now(), STREAM_CREATION_TIMEOUT);
    while !want.iter().all(|w| ids.contains_key(*w)) {
        let ev = tokio::select! {
            biased;
            e = s.next() => e,
            _ = clock.sleep_until(deadline) => return,
        };
        match ev {
            Event::Open { id, headers, fin } => {
                if s.writer.reply(id).await.is_err() {
                    return;
                }
                if let Some(t) = headers.get("streamtype") {
                    if t == "stdin" && fin {
                        stdin_fin = true;
                    }
                    ids.insert(t.clone(), id);
                }
            }
            Event::Closed => return,
            _ => {}
        }
    }
    let (stdin_tx, stdin_rx) = mpsc::unbounded_channel();
    let (out_tx, mut out_rx) = mpsc::channel::<(u8, Bytes)>(16);
    let argv = opts.command.clone();
    let streams = Streams {
        stdin: opts.stdin.then_some(stdin_rx),
        out: out_tx,
        tty: opts.tty,
    };
    let mut stdin_tx = (!stdin_fin).then_some(stdin_tx);
    let stdin_id = ids.get("stdin").copied();
    let run = crate::exec::run(target, argv.clone(), streams);
    tokio::pin!(run);
    let stream_of = |ch: u8| -> Option<u32> {
        match ch {
            STDOUT => ids.get("stdout").copied(),
            STDERR => ids.get("stderr").copied(),
            ERROR => ids.get("error").copied(),
            STDIN => None,
            _ => None,
        }
    };
    let code = loop {
        tokio::select! {
            biased;
            Some((ch, data)) = out_rx.recv() => {
                if let Some(id) = stream_of(ch)
                    && s.writer.data(id, &data).await.is_err()
                {
                    return;
                }
            }
            code = &mut run => break code,
            ev = s.next() => match ev {
                Event::Data { id, data, fin } if Some(id) == stdin_id => {
                    if let Some(tx) = &stdin_tx
                        && !data.is_empty()
                    {
                        let _ = tx.send(data);
                    }
                    if fin {
                        stdin_tx = None;
                    }
                }
                Event::Open { id, .. } if s.writer.reply(id).await.is_err() => return,
                Event::Reset { id } if Some(id) == stdin_id => stdin_tx = None,
                Event::Closed => return,
                _ => {}
            },
        }
    };
    while let Some((ch, data)) = out_rx.recv().await {
        if let Some(id) = stream_of(ch)
            && s.writer.data(id, &data).await.is_err()
        {
            return;
        }
    }
    for t in ["stdout", "stderr"] {
        if let Some(&id) = ids.get(t) {
            let _ = s.writer.fin(id).await;
        }
    }
    if let Some(&id) = ids.get("error") {
        let status = crate::exec::exit_status(code, &argv);
        let _ = s.writer.data(id, status.as_bytes()).await;
        let _ = s.writer.fin(id).await;
    }
    let last = ids.values().copied().max().unwrap_or(0);
    let _ = s.writer.goaway(last).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_spdy3s() {
        let d = dictionary();
        assert_eq!(d.len(), 1423);
        assert_eq!(&d[..11], b"\0\0\0\x07options");
        assert!(d.ends_with(b",enq=0."));
    }

    #[test]
    fn header_blocks_round_trip_through_one_zlib_stream_per_direction() {
        let mut a = Codec::new();
        let mut b = Codec::new();
        for i in 0..3 {
            let port = i.to_string();
            let block = a.compress(&[("streamtype", "data"), ("port", &port)]);
            let h = b.decompress(&block).expect("inflate");
            assert_eq!(h["streamtype"], "data");
            assert_eq!(h["port"], port);
        }
        assert!(b.decompress(&[1, 2, 3, 4, 5]).is_none());
    }

    #[tokio::test]
    async fn a_dropped_session_closes_the_connection() {
        use tokio::io::AsyncReadExt;
        // The client must see EOF when the kubelet's side goes (a stopped kubelet, an ended
        // exec), or kubectl and the API server's proxy wait for ever.
        let (mut client, server) = tokio::io::duplex(1024);
        let s = session(server);
        drop(s);
        let mut buf = [0u8; 16];
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), client.read(&mut buf))
            .await
            .expect("the connection closes");
        assert_eq!(n.unwrap(), 0);
    }
}
