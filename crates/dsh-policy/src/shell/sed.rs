//! `sed` scripts, parsed: a script runs free only when none of its commands writes a file,
//! reads one the line does not name, or runs a program — `w`/`W`, `r`/`R`, `e`, and the `w`
//! and `e` flags of `s`. Anything the parser does not understand loses the free pass too.

/// Why `script` is not read-only, or `Ok` when every command only edits the stream.
pub(crate) fn judge_script(script: &str) -> Result<(), String> {
    let mut p = Parser {
        s: script.as_bytes(),
        i: 0,
    };
    p.script()
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn skip_blank(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// Skips a comment: to the end of the line; a backslash does not continue it.
    fn comment(&mut self) {
        while let Some(c) = self.bump() {
            if c == b'\n' {
                break;
            }
        }
    }

    /// A label (`:x`, `b x`, `t x`): up to blanks, `;` or a newline — what follows is the
    /// next command, as GNU sed reads it.
    fn label(&mut self) {
        self.skip_blank();
        while !matches!(self.peek(), None | Some(b';' | b'\n' | b' ' | b'\t' | b'}')) {
            self.i += 1;
        }
    }

    /// Skips to the end of the line (the text of `a`, `i`, `c`).
    fn rest_of_line(&mut self) {
        while let Some(c) = self.bump() {
            if c == b'\n' {
                break;
            }
            if c == b'\\' {
                self.i += 1;
            }
        }
    }

    /// A label or file name: up to `;` or a newline.
    fn word(&mut self) -> String {
        self.skip_blank();
        let start = self.i;
        while !matches!(self.peek(), None | Some(b';' | b'\n' | b'}')) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i])
            .trim()
            .to_owned()
    }

    /// A delimited part (`/re/`), the delimiter already consumed.
    fn delimited(&mut self, delim: u8) -> Result<(), String> {
        while let Some(c) = self.bump() {
            if c == b'\\' {
                self.i += 1;
            } else if c == delim {
                return Ok(());
            } else if c == b'\n' && delim != b'\n' {
                return Err("a newline inside a regular expression".to_owned());
            }
        }
        Err("an unterminated regular expression".to_owned())
    }

    fn address(&mut self) -> Result<(), String> {
        match self.peek() {
            Some(b'0'..=b'9') => {
                while matches!(self.peek(), Some(b'0'..=b'9' | b'~')) {
                    self.i += 1;
                }
            }
            Some(b'$') => self.i += 1,
            Some(b'/') => {
                self.i += 1;
                self.delimited(b'/')?;
                while matches!(self.peek(), Some(b'I' | b'M')) {
                    self.i += 1;
                }
            }
            Some(b'\\') => {
                self.i += 1;
                let d = self.bump().ok_or("an address with no delimiter")?;
                self.delimited(d)?;
                while matches!(self.peek(), Some(b'I' | b'M')) {
                    self.i += 1;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn script(&mut self) -> Result<(), String> {
        loop {
            while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b';')) {
                self.i += 1;
            }
            let Some(_) = self.peek() else {
                return Ok(());
            };
            if self.peek() == Some(b'#') {
                self.comment();
                continue;
            }
            self.address()?;
            if self.peek() == Some(b',') {
                self.i += 1;
                if matches!(self.peek(), Some(b'+' | b'~')) {
                    self.i += 1;
                }
                self.address()?;
            }
            self.skip_blank();
            while self.peek() == Some(b'!') {
                self.i += 1;
                self.skip_blank();
            }
            let cmd = self.bump().ok_or("an address with no command")?;
            self.command(cmd)?;
        }
    }

    fn command(&mut self, cmd: u8) -> Result<(), String> {
        match cmd {
            b'{' | b'}' | b'=' | b'd' | b'D' | b'g' | b'G' | b'h' | b'H' | b'n' | b'N' | b'p'
            | b'P' | b'x' | b'z' | b'F' => Ok(()),
            b'l' | b'q' | b'Q' | b'L' => {
                self.skip_blank();
                while matches!(self.peek(), Some(b'0'..=b'9')) {
                    self.i += 1;
                }
                Ok(())
            }
            b'b' | b't' | b'T' | b':' | b'v' => {
                self.label();
                Ok(())
            }
            b'a' | b'i' | b'c' => {
                self.rest_of_line();
                Ok(())
            }
            b'y' => {
                let d = self.bump().ok_or("`y` with no delimiter")?;
                self.delimited(d)?;
                self.delimited(d)
            }
            b's' => {
                let d = self.bump().ok_or("`s` with no delimiter")?;
                if d == b'\n' || d == b'\\' {
                    return Err("`s` with a delimiter the policy does not follow".to_owned());
                }
                self.delimited(d)?;
                self.delimited(d)?;
                while let Some(f) = self.peek() {
                    match f {
                        b'g' | b'p' | b'i' | b'I' | b'm' | b'M' | b'0'..=b'9' => self.i += 1,
                        b'e' => {
                            return Err("the `e` flag of `s` runs the pattern space as a command"
                                .to_owned());
                        }
                        b'w' => {
                            return Err(format!("the `w` flag of `s` writes the file `{}`", {
                                self.i += 1;
                                self.word()
                            }));
                        }
                        _ => break,
                    }
                }
                Ok(())
            }
            b'e' => Err("the `e` command runs a command".to_owned()),
            b'w' | b'W' => Err(format!(
                "the `{}` command writes the file `{}`",
                cmd as char,
                self.word()
            )),
            b'r' | b'R' => Err(format!(
                "the `{}` command reads the file `{}`",
                cmd as char,
                self.word()
            )),
            other => Err(format!(
                "`{}` is not a sed command the policy knows",
                (other as char).escape_default()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::judge_script;

    #[test]
    fn stream_edits_are_read_only() {
        for s in [
            "1p",
            "1,5p",
            "s/a/b/g",
            "s|/usr|/opt|2p",
            "/^#/d; s/x/y/",
            "$!N;P;D",
            "10q",
            "y/abc/xyz/",
            "/start/,/end/{s/a/b/;p}",
            "1~2d",
            ":a;N;$!ba;s/\\n/ /g",
            "# a comment\np",
            "a\\\nappended text",
            "0,/re/s//x/",
            "\\%path%d",
        ] {
            assert_eq!(judge_script(s), Ok(()), "{s}");
        }
    }

    #[test]
    fn writing_reading_and_running_commands_lose_the_pass() {
        for s in [
            "w out.txt",
            "1w /tmp/x",
            "s/a/b/w out",
            "s/a/b/gw out",
            "s/.*/id/e",
            "e id",
            "1e touch x",
            "r /etc/passwd",
            "R other",
            "W out",
            "/x/{w out\n}",
            "p;w out",
            "s/a/b/ ; w o",
            "1!w o",
            "$ W o",
            "#x\\\ne id",
            ":x;t x e id",
            "b end e id",
        ] {
            assert!(judge_script(s).is_err(), "{s} must not be free");
        }
    }

    #[test]
    fn what_does_not_parse_loses_the_pass() {
        for s in ["s/a/b", "y/ab/", "1,", "k", "/unterminated"] {
            assert!(judge_script(s).is_err(), "{s}");
        }
    }
}
