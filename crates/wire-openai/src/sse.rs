//! An incremental Server-Sent Events parser following the WHATWG event-stream rules.
//!
//! Bytes in, events out: lines end in LF, CRLF or a lone CR (also when the CR and the LF arrive
//! in different reads); a leading BOM is skipped; `field: value` loses one optional space;
//! several `data:` lines join with `\n`; `:` lines are comments; `event`, `id` and `retry` are
//! kept. Bytes are buffered until a whole line is there, so a read that ends inside a multi-byte
//! UTF-8 character is fine. At end of stream an event not closed by a blank line is discarded.

/// One dispatched event. Borrowed from the parser: copy what you keep.
#[derive(Debug, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` name, empty when none was given (the default type `message`).
    pub event: &'a str,
    /// The `data:` lines joined with `\n`.
    pub data: &'a str,
    /// The last `id:` seen in the stream so far.
    pub id: &'a str,
    /// The last valid `retry:` value seen, in milliseconds.
    pub retry: Option<u64>,
    /// Byte offset in the stream where this event's first line starts.
    pub offset: usize,
}

/// The parser state for one stream.
///
/// ```
/// use std::convert::Infallible;
/// let mut parser = wire_openai::sse::SseParser::new();
/// let mut data = Vec::new();
/// // A CRLF split across reads is one line end, and a field name may be split too.
/// for read in [&b"event: ping\r"[..], b"\nda", b"ta: 1\r\n\r\n: keep-alive\n\ndata: 2\n\n"] {
///     parser.feed(read, |event| {
///         data.push((event.event.to_owned(), event.data.to_owned()));
///         Ok::<(), Infallible>(())
///     })?;
/// }
/// assert_eq!(data, [("ping".to_owned(), "1".to_owned()), (String::new(), "2".to_owned())]);
/// assert_eq!(parser.events(), 2);
/// # Ok::<(), Infallible>(())
/// ```
#[derive(Debug)]
pub struct SseParser {
    /// The start of a line that has not ended yet.
    partial: Vec<u8>,
    /// Bytes consumed so far (the stream offset of `partial`'s first byte plus its length).
    consumed: usize,
    /// The previous read ended in CR: a LF at the start of the next read belongs to it.
    skip_lf: bool,
    /// Whether the start of the stream (and so a possible BOM) has been handled.
    started: bool,
    event: String,
    data: String,
    id: String,
    retry: Option<u64>,
    /// Offset of the first line of the event being built.
    event_offset: Option<usize>,
    /// Events dispatched so far.
    events: u64,
    /// The most bytes one event may take ([`SseParser::with_max_event_bytes`]).
    max_event_bytes: usize,
    /// Bytes of the lines since the last blank line, line ends not counted.
    event_bytes: usize,
    /// Whether an event passed `max_event_bytes`: nothing more is parsed.
    oversized: bool,
}

impl Default for SseParser {
    fn default() -> Self {
        Self {
            partial: Vec::new(),
            consumed: 0,
            skip_lf: false,
            started: false,
            event: String::new(),
            data: String::new(),
            id: String::new(),
            retry: None,
            event_offset: None,
            events: 0,
            max_event_bytes: usize::MAX,
            event_bytes: 0,
            oversized: false,
        }
    }
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser at the start of a stream whose events may take at most `bytes` each: the lines
    /// from the end of the event before (comments included) to the blank line that ends it,
    /// line ends not counted. A line or event that passes it stops the parser before anything
    /// of it is dispatched ([`SseParser::is_oversized`]), however the stream is cut into reads,
    /// so one that never ends is not buffered without bound.
    pub fn with_max_event_bytes(bytes: usize) -> Self {
        Self {
            max_event_bytes: bytes,
            ..Self::default()
        }
    }

    /// Whether an event passed the parser's limit ([`SseParser::with_max_event_bytes`]): then
    /// it dispatched nothing of it, and every later [`SseParser::feed`] does nothing.
    pub fn is_oversized(&self) -> bool {
        self.oversized
    }

    /// Whether the event so far, with `more` bytes of a line, passes the limit; if so the parser
    /// stops.
    fn passes_limit(&mut self, more: usize) -> bool {
        self.oversized = self.event_bytes.saturating_add(more) > self.max_event_bytes;
        self.oversized
    }

    /// Bytes seen so far.
    pub fn offset(&self) -> usize {
        self.consumed
    }

    /// Events dispatched so far: each complete event with data, whatever its type. Comments,
    /// blank lines, an event without data (which the rules drop) and the bytes of an event not
    /// yet ended are not events: a caller that waits for progress (an idle timeout) can tell a
    /// server that only keeps the connection alive from one that answers.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Feeds bytes, calling `on_event` for every event they complete. Stops early, returning
    /// the callback's error, if it fails; and, returning `Ok`, at a line that passes the
    /// parser's event limit ([`SseParser::is_oversized`]). A callback kept across feeds is
    /// passed as `&mut callback`, which is one too.
    pub fn feed<E>(
        &mut self,
        mut bytes: &[u8],
        mut on_event: impl FnMut(SseEvent<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let on_event = &mut on_event;
        if self.oversized {
            return Ok(());
        }
        if self.skip_lf && !bytes.is_empty() {
            self.skip_lf = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
                self.consumed += 1;
            }
        }
        // memchr: the line scan is the hot loop of every stream (see the decode bench).
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            let terminator = if bytes[end] == b'\r' {
                match bytes.get(end + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    None => {
                        self.skip_lf = true;
                        1
                    }
                }
            } else {
                1
            };
            let line_start = self.consumed - self.partial.len();
            if self.passes_limit(self.partial.len() + end) {
                return Ok(());
            }
            if self.partial.is_empty()
                && let Some(skip) = self.single_data_event(bytes, end, terminator, on_event)?
            {
                // Fast path: `data: …` and the blank line that ends it, both in this read.
                bytes = &bytes[skip..];
                self.consumed += skip;
                continue;
            }
            if self.partial.is_empty() {
                self.line(&bytes[..end], line_start, on_event)?;
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&bytes[..end]);
                let result = self.line(&line, line_start, on_event);
                line.clear();
                self.partial = line;
                result?;
            }
            bytes = &bytes[end + terminator..];
            self.consumed += end + terminator;
        }
        if self.passes_limit(self.partial.len() + bytes.len()) {
            return Ok(());
        }
        self.partial.extend_from_slice(bytes);
        self.consumed += bytes.len();
        Ok(())
    }

    /// Dispatches a one-line `data:` event straight from the read, without copying it, when
    /// nothing else is pending and the blank line that ends it is in the same read. Returns the
    /// bytes consumed, or `None` to take the general path.
    fn single_data_event<E>(
        &mut self,
        bytes: &[u8],
        end: usize,
        terminator: usize,
        on_event: &mut impl FnMut(SseEvent<'_>) -> Result<(), E>,
    ) -> Result<Option<usize>, E> {
        if !self.started || self.event_offset.is_some() || bytes[end] != b'\n' {
            return Ok(None);
        }
        let Some(value) = bytes[..end].strip_prefix(b"data:") else {
            return Ok(None);
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        let after = end + terminator;
        if bytes.get(after) != Some(&b'\n') {
            return Ok(None);
        }
        let Ok(data) = std::str::from_utf8(value) else {
            return Ok(None);
        };
        let offset = self.consumed;
        self.event_bytes = 0;
        self.events += 1;
        on_event(SseEvent {
            event: "",
            data,
            id: &self.id,
            retry: self.retry,
            offset,
        })?;
        Ok(Some(after + 1))
    }

    fn line<E>(
        &mut self,
        mut raw: &[u8],
        offset: usize,
        on_event: &mut impl FnMut(SseEvent<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if !self.started {
            self.started = true;
            raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
        }
        if raw.is_empty() {
            self.event_bytes = 0;
            return self.dispatch(on_event);
        }
        self.event_bytes += raw.len();
        if raw[0] == b':' {
            return Ok(());
        }
        // `from_utf8` first: the lossy path is several times slower on valid input.
        let text = match std::str::from_utf8(raw) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(raw),
        };
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        self.event_offset.get_or_insert(offset);
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            "id" if !value.contains('\0') => {
                self.id.clear();
                self.id.push_str(value);
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch<E>(
        &mut self,
        on_event: &mut impl FnMut(SseEvent<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let offset = self.event_offset.take().unwrap_or(self.consumed);
        if self.data.is_empty() {
            self.event.clear();
            return Ok(());
        }
        self.data.pop(); // The last data line's `\n`.
        self.events += 1;
        let result = on_event(SseEvent {
            event: &self.event,
            data: &self.data,
            id: &self.id,
            retry: self.retry,
            offset,
        });
        self.data.clear();
        self.event.clear();
        result
    }
}

#[cfg(test)]
mod tests;
