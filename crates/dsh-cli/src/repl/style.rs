//! SGR styles, or none: every styled piece ends with a reset, so no style leaks; without
//! colour (a pipe, `NO_COLOR`) the text comes back as it is.

/// Whether to style.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Style {
    color: bool,
}

impl Style {
    pub(crate) fn new(color: bool) -> Style {
        Style { color }
    }

    fn sgr(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub(crate) fn bold(self, text: &str) -> String {
        self.sgr("1", text)
    }
    pub(crate) fn dim(self, text: &str) -> String {
        self.sgr("2", text)
    }
    pub(crate) fn red(self, text: &str) -> String {
        self.sgr("31", text)
    }
    pub(crate) fn green(self, text: &str) -> String {
        self.sgr("32", text)
    }
    pub(crate) fn yellow(self, text: &str) -> String {
        self.sgr("33", text)
    }
    pub(crate) fn cyan(self, text: &str) -> String {
        self.sgr("36", text)
    }
}
