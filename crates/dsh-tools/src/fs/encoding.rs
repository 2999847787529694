//! Text encodings of files: which one a file is in, decoding it, and writing text back in it
//! byte-exactly.
//!
//! Detection looks at the first [`DETECT_BYTES`] of a file, the same way for every tool, so
//! `read_file` shows a file as `edit_file` and `write_file` will change it:
//!
//! 1. a UTF-16 byte order mark (`FF FE` little-endian, `FE FF` big-endian) → UTF-16, if what
//!    follows is valid UTF-16 and looks like text (`FF FE 00 00` is UTF-32: binary);
//! 2. a NUL byte in the first 8 KiB → binary (as before encodings were decoded);
//! 3. valid UTF-8 (a UTF-8 byte order mark included; it stays part of the text, `U+FEFF`) →
//!    UTF-8;
//! 4. text that is not UTF-8 but holds UTF-8 multi-byte sequences → UTF-8 still: it is UTF-8
//!    with a few stray bytes (a truncated or patched file), not Latin-1 (where such sequences
//!    would be pairs like `Ã©`). Showing it as 1252 would garble every UTF-8 character, so it
//!    is treated as before: its valid lines read, the others and edits are refused;
//! 5. anything else that looks like text → Windows-1252, a superset of Latin-1's printable
//!    range. The five bytes 1252 leaves undefined (`81 8D 8F 90 9D`) decode to the C1 control
//!    characters of the same value, as in Latin-1, so every byte decodes and encodes back to
//!    itself;
//! 6. otherwise binary.
//!
//! "Looks like text": no NUL, and at most one in a hundred characters a control character
//! other than tab, line feed, carriage return and form feed (C0, DEL, and C1 — which in 1252
//! are only the five undefined bytes).
//!
//! Decoding and encoding are exact inverses for every file detected as text: UTF-16 keeps its
//! byte order mark, 1252 maps its 256 bytes one to one onto 256 characters. A character the
//! encoding has not is refused ([`Unencodable`]), never replaced. A file whose first
//! [`DETECT_BYTES`] are valid UTF-8 is UTF-8 even if a later byte is not (it is then refused
//! where that byte is met, as before).

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom};

/// Bytes of a file looked at to decide its encoding. Every `read_file` of a large file reads
/// and checks them before its page, so the window is kept well below the 8 MiB it may scan
/// to count lines; a file whose first byte that is not UTF-8 lies past it is UTF-8 with a bad
/// line, as before encodings were decoded (not measured yet: `read_10mb` in the benches).
pub const DETECT_BYTES: u64 = 1024 * 1024;
/// Bytes looked at for a NUL byte (binary) in a file with no UTF-16 byte order mark.
const NUL_SNIFF_BYTES: usize = 8 * 1024;
/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;

/// Windows-1252's characters for the bytes `0x80..=0x9F`; every other byte is the code point
/// of the same value. The five bytes 1252 leaves undefined are their C1 control characters.
const CP1252_HIGH: [char; 32] = [
    '\u{20AC}', '\u{0081}', '\u{201A}', '\u{0192}', '\u{201E}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{02C6}', '\u{2030}', '\u{0160}', '\u{2039}', '\u{0152}', '\u{008D}', '\u{017D}', '\u{008F}',
    '\u{0090}', '\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{02DC}', '\u{2122}', '\u{0161}', '\u{203A}', '\u{0153}', '\u{009D}', '\u{017E}', '\u{0178}',
];

/// A text encoding dsh reads and writes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    /// With its byte order mark, which is not part of the decoded text.
    Utf16Le,
    /// With its byte order mark, which is not part of the decoded text.
    Utf16Be,
    Windows1252,
}

impl Encoding {
    /// The name shown to the model and in tool values.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Utf16Le => "utf-16le",
            Encoding::Utf16Be => "utf-16be",
            Encoding::Windows1252 => "windows-1252",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a file's first bytes say it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Detected {
    Text(Encoding),
    /// Not text; the reason, e.g. "it contains NUL bytes".
    Binary(String),
}

/// Decides a file's encoding from its first [`DETECT_BYTES`] (see the module docs), reading
/// from the start of `src`; leaves `src` positioned anywhere.
pub fn detect<R: Read + Seek>(src: &mut R) -> io::Result<Detected> {
    src.seek(SeekFrom::Start(0))?;
    let (first, eof) = read_up_to(src, CHUNK)?;
    let bom = match first.as_slice() {
        [0xFF, 0xFE, 0, 0, ..] => {
            return Ok(Detected::Binary(
                "it looks like UTF-32, which is not decoded".to_owned(),
            ));
        }
        [0xFF, 0xFE, ..] => Some(Encoding::Utf16Le),
        [0xFE, 0xFF, ..] => Some(Encoding::Utf16Be),
        _ => None,
    };
    if let Some(enc) = bom {
        return scan(src, first, eof, enc, true);
    }
    if memchr::memchr(0, &first[..first.len().min(NUL_SNIFF_BYTES)]).is_some() {
        return Ok(Detected::Binary("it contains NUL bytes".to_owned()));
    }
    if scan(src, first, eof, Encoding::Utf8, false)? == Detected::Text(Encoding::Utf8) {
        return Ok(Detected::Text(Encoding::Utf8));
    }
    src.seek(SeekFrom::Start(0))?;
    let (first, eof) = read_up_to(src, CHUNK)?;
    match scan(src, first, eof, Encoding::Windows1252, true)? {
        Detected::Binary(_) => Ok(Detected::Binary(
            "it is neither UTF-8 nor text in UTF-16 or Windows-1252".to_owned(),
        )),
        text => Ok(text),
    }
}

/// Decodes the window starting with `first` as `enc`; with `judge`, also whether it looks like
/// text.
fn scan<R: Read>(
    src: &mut R,
    mut chunk: Vec<u8>,
    mut eof: bool,
    enc: Encoding,
    judge: bool,
) -> io::Result<Detected> {
    let mut decoder = Decoder::new(enc);
    let mut text = String::new();
    let mut looks = TextLikeness::default();
    let mut seen = 0u64;
    let mut utf8_sequences = false;
    loop {
        if enc == Encoding::Windows1252 && !utf8_sequences {
            // A sequence split between two chunks is missed; one whole one is enough.
            utf8_sequences = chunk.utf8_chunks().any(|c| !c.valid().is_ascii());
        }
        text.clear();
        if let Err(e) = decoder.decode(&chunk, &mut text) {
            return Ok(Detected::Binary(e.to_string()));
        }
        seen += chunk.len() as u64;
        let window_full = seen >= DETECT_BYTES;
        if eof
            && !window_full
            && let Err(e) = decoder.finish(&mut text)
        {
            return Ok(Detected::Binary(e.to_string()));
        }
        if judge {
            looks.count(&text);
        }
        if eof || window_full {
            break;
        }
        (chunk, eof) = read_up_to(src, CHUNK)?;
    }
    if judge && let Some(why) = looks.verdict() {
        return Ok(Detected::Binary(why));
    }
    if utf8_sequences {
        // Rule 4 of the module docs: UTF-8 with stray bytes.
        return Ok(Detected::Text(Encoding::Utf8));
    }
    Ok(Detected::Text(enc))
}

/// Reads until `n` bytes or the end; says whether the end was reached.
fn read_up_to(src: &mut impl Read, n: usize) -> io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::with_capacity(n);
    src.take(n as u64).read_to_end(&mut buf)?;
    let eof = buf.len() < n;
    Ok((buf, eof))
}

/// Counts what makes decoded text look binary.
#[derive(Default)]
struct TextLikeness {
    chars: u64,
    controls: u64,
    nul: bool,
}

impl TextLikeness {
    fn count(&mut self, text: &str) {
        for c in text.chars() {
            self.chars += 1;
            match c {
                '\0' => self.nul = true,
                '\t' | '\n' | '\r' | '\x0C' => {}
                c if c < ' ' || ('\x7F'..='\u{9F}').contains(&c) => self.controls += 1,
                _ => {}
            }
        }
    }

    fn verdict(&self) -> Option<String> {
        if self.nul {
            Some("it contains NUL characters".to_owned())
        } else if self.controls * 100 > self.chars.max(100) {
            Some(format!(
                "{} of its first {} characters are control characters",
                self.controls, self.chars
            ))
        } else {
            None
        }
    }
}

/// Bytes that are not valid text in the encoding, at a byte offset of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub encoding: Encoding,
    pub offset: u64,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "it is not valid {} at byte {}",
            self.encoding, self.offset
        )
    }
}

impl std::error::Error for DecodeError {}

/// Decodes a byte stream chunk by chunk; a character split between chunks is carried over.
/// UTF-16's leading byte order mark is dropped.
pub struct Decoder {
    enc: Encoding,
    carry: Vec<u8>,
    /// Bytes of the stream before `carry`.
    offset: u64,
}

impl Decoder {
    pub fn new(enc: Encoding) -> Self {
        Decoder {
            enc,
            carry: Vec::new(),
            offset: 0,
        }
    }

    /// Appends the text of `bytes` to `out`.
    pub fn decode(&mut self, bytes: &[u8], out: &mut String) -> Result<(), DecodeError> {
        match self.enc {
            Encoding::Windows1252 => {
                out.extend(bytes.iter().map(|&b| cp1252_char(b)));
                self.offset += bytes.len() as u64;
                Ok(())
            }
            Encoding::Utf8 => {
                let mut buf = std::mem::take(&mut self.carry);
                buf.extend_from_slice(bytes);
                let valid = match std::str::from_utf8(&buf) {
                    Ok(s) => s.len(),
                    Err(e) if e.error_len().is_none() => e.valid_up_to(),
                    Err(e) => return Err(self.error(e.valid_up_to())),
                };
                out.push_str(std::str::from_utf8(&buf[..valid]).unwrap_or_default());
                self.carry = buf[valid..].to_vec();
                self.offset += valid as u64;
                Ok(())
            }
            Encoding::Utf16Le | Encoding::Utf16Be => {
                let mut buf = std::mem::take(&mut self.carry);
                buf.extend_from_slice(bytes);
                let unit = |i: usize| {
                    let pair = [buf[i], buf[i + 1]];
                    if self.enc == Encoding::Utf16Le {
                        u16::from_le_bytes(pair)
                    } else {
                        u16::from_be_bytes(pair)
                    }
                };
                let mut i = 0;
                if self.offset == 0 && buf.len() >= 2 && unit(0) == 0xFEFF {
                    i = 2;
                }
                while i + 2 <= buf.len() {
                    let u = unit(i);
                    let c = match u {
                        0xD800..=0xDBFF => {
                            if i + 4 > buf.len() {
                                break;
                            }
                            let low = unit(i + 2);
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return Err(self.error(i));
                            }
                            let c = 0x10000
                                + ((u32::from(u) - 0xD800) << 10)
                                + (u32::from(low) - 0xDC00);
                            i += 2;
                            char::from_u32(c)
                        }
                        0xDC00..=0xDFFF => None,
                        _ => char::from_u32(u32::from(u)),
                    };
                    let Some(c) = c else {
                        return Err(self.error(i));
                    };
                    out.push(c);
                    i += 2;
                }
                self.carry = buf[i..].to_vec();
                self.offset += i as u64;
                Ok(())
            }
        }
    }

    /// The end of the stream: a character left unfinished is an error.
    pub fn finish(&mut self, _out: &mut String) -> Result<(), DecodeError> {
        if self.carry.is_empty() {
            Ok(())
        } else {
            Err(self.error(0))
        }
    }

    fn error(&self, at: usize) -> DecodeError {
        DecodeError {
            encoding: self.enc,
            offset: self.offset + at as u64,
        }
    }
}

fn cp1252_char(b: u8) -> char {
    match b {
        0x80..=0x9F => CP1252_HIGH[usize::from(b - 0x80)],
        _ => char::from(b),
    }
}

fn cp1252_byte(c: char) -> Option<u8> {
    match u32::from(c) {
        n @ (0..=0x7F | 0xA0..=0xFF) => u8::try_from(n).ok(),
        _ => CP1252_HIGH
            .iter()
            .position(|&h| h == c)
            .and_then(|i| u8::try_from(0x80 + i).ok()),
    }
}

/// Decodes a whole file's bytes as `enc`.
pub fn decode_all(enc: Encoding, bytes: Vec<u8>) -> Result<String, DecodeError> {
    if enc == Encoding::Utf8 {
        return String::from_utf8(bytes).map_err(|e| DecodeError {
            encoding: enc,
            offset: e.utf8_error().valid_up_to() as u64,
        });
    }
    let mut decoder = Decoder::new(enc);
    let mut out = String::with_capacity(bytes.len());
    decoder.decode(&bytes, &mut out)?;
    decoder.finish(&mut out)?;
    Ok(out)
}

/// A character the encoding cannot represent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unencodable {
    pub encoding: Encoding,
    pub ch: char,
}

impl fmt::Display for Unencodable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` (U+{:04X}) cannot be written in {}",
            self.ch.escape_debug(),
            u32::from(self.ch),
            self.encoding
        )
    }
}

/// Encodes `text` as `enc`: UTF-16 with its byte order mark; 1252 refusing any character it
/// has not.
pub fn encode(enc: Encoding, text: String) -> Result<Vec<u8>, Unencodable> {
    match enc {
        Encoding::Utf8 => Ok(text.into_bytes()),
        Encoding::Windows1252 => text
            .chars()
            .map(|ch| cp1252_byte(ch).ok_or(Unencodable { encoding: enc, ch }))
            .collect(),
        Encoding::Utf16Le | Encoding::Utf16Be => {
            let mut out = Vec::with_capacity(2 + text.len() * 2);
            for u in std::iter::once(0xFEFF).chain(text.encode_utf16()) {
                out.extend_from_slice(&if enc == Encoding::Utf16Le {
                    u.to_le_bytes()
                } else {
                    u.to_be_bytes()
                });
            }
            Ok(out)
        }
    }
}

/// A reader of a file's text in UTF-8, decoded from `enc` as it is read. Bytes that are not
/// valid in `enc` are an `InvalidData` error naming their offset.
pub struct Transcoder<R> {
    inner: R,
    decoder: Decoder,
    raw: Vec<u8>,
    out: String,
    pos: usize,
    done: bool,
}

impl<R: Read> Transcoder<R> {
    pub fn new(inner: R, enc: Encoding) -> Self {
        Transcoder {
            inner,
            decoder: Decoder::new(enc),
            raw: vec![0; CHUNK],
            out: String::new(),
            pos: 0,
            done: false,
        }
    }
}

impl<R: Read> Read for Transcoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let invalid = |e: DecodeError| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
        while self.pos == self.out.len() {
            if self.done {
                return Ok(0);
            }
            self.out.clear();
            self.pos = 0;
            let n = self.inner.read(&mut self.raw)?;
            if n == 0 {
                self.done = true;
                self.decoder.finish(&mut self.out).map_err(invalid)?;
            } else {
                self.decoder
                    .decode(&self.raw[..n], &mut self.out)
                    .map_err(invalid)?;
            }
        }
        let rest = &self.out.as_bytes()[self.pos..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn detected(bytes: &[u8]) -> Detected {
        detect(&mut Cursor::new(bytes)).unwrap()
    }

    #[test]
    fn every_1252_byte_decodes_and_encodes_back_to_itself() {
        let all: Vec<u8> = (0..=255).collect();
        let text = decode_all(Encoding::Windows1252, all.clone()).unwrap();
        assert_eq!(text.chars().count(), 256);
        assert_eq!(encode(Encoding::Windows1252, text).unwrap(), all);
        assert_eq!(cp1252_char(0x80), '€');
        assert_eq!(cp1252_char(0x93), '\u{201C}');
        assert_eq!(cp1252_char(0x81), '\u{81}');
        assert_eq!(cp1252_char(0xE9), 'é');
    }

    #[test]
    fn characters_1252_has_not_are_refused_by_name() {
        let e = encode(Encoding::Windows1252, "ok 日本".to_owned()).unwrap_err();
        assert_eq!(e.ch, '日');
        assert_eq!(
            e.to_string(),
            "`日` (U+65E5) cannot be written in windows-1252"
        );
        // U+0080 is a C1 control that 1252 spells with no byte (0x80 is €).
        assert!(encode(Encoding::Windows1252, "\u{80}".to_owned()).is_err());
    }

    #[test]
    fn detection_follows_the_documented_order() {
        assert_eq!(detected(b"plain\n"), Detected::Text(Encoding::Utf8));
        assert_eq!(detected(b""), Detected::Text(Encoding::Utf8));
        assert_eq!(
            detected("\u{feff}bom é".as_bytes()),
            Detected::Text(Encoding::Utf8)
        );
        assert_eq!(
            detected(b"caf\xe9\r\n"),
            Detected::Text(Encoding::Windows1252)
        );
        // UTF-8 with one stray byte stays UTF-8.
        assert_eq!(
            detected(b"caf\xc3\xa9 ok\n\xff\n"),
            Detected::Text(Encoding::Utf8)
        );
        assert_eq!(
            detected(b"\xff\xfea\x00"),
            Detected::Text(Encoding::Utf16Le)
        );
        assert_eq!(
            detected(b"\xfe\xff\x00a"),
            Detected::Text(Encoding::Utf16Be)
        );
        assert!(matches!(
            detected(b"\xff\xfe\x00\x00a\x00\x00\x00"),
            Detected::Binary(_)
        ));
        assert_eq!(
            detected(b"a\x00b"),
            Detected::Binary("it contains NUL bytes".to_owned())
        );
        // Not UTF-8 and full of control bytes.
        let noisy: Vec<u8> = (0..200u8)
            .map(|i| if i % 4 == 0 { 0x01 } else { 0xE9 })
            .collect();
        assert!(matches!(detected(&noisy), Detected::Binary(_)));
        // A BOM followed by a lone surrogate, or an odd byte at the end.
        assert!(matches!(
            detected(b"\xff\xfe\x00\xd8a\x00"),
            Detected::Binary(_)
        ));
        assert!(matches!(detected(b"\xff\xfea\x00b"), Detected::Binary(_)));
    }

    #[test]
    fn utf16_round_trips_with_its_bom_and_surrogate_pairs() {
        for enc in [Encoding::Utf16Le, Encoding::Utf16Be] {
            let text = "a\r\n😀 é\n".to_owned();
            let bytes = encode(enc, text.clone()).unwrap();
            assert_eq!(decode_all(enc, bytes).unwrap(), text);
        }
    }

    #[test]
    fn the_transcoder_carries_characters_split_between_reads() {
        let text = "x😀y\ré€\n".repeat(5000);
        for enc in [Encoding::Utf16Le, Encoding::Utf16Be, Encoding::Windows1252] {
            let plain = text.replace(
                '😀',
                if enc == Encoding::Windows1252 {
                    "z"
                } else {
                    "😀"
                },
            );
            let bytes = encode(enc, plain.clone()).unwrap();
            let mut out = String::new();
            // A byte at a time from the inner reader.
            let slow = SlowReader(Cursor::new(bytes));
            Transcoder::new(slow, enc).read_to_string(&mut out).unwrap();
            assert_eq!(out, plain, "{enc}");
        }
    }

    struct SlowReader(Cursor<Vec<u8>>);
    impl Read for SlowReader {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(3);
            self.0.read(&mut buf[..n])
        }
    }
}
