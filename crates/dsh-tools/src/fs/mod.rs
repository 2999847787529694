//! File tools: one file per tool, the file seam (observed versions) that the reading and
//! changing tools share, and the text encodings they all read and write back alike.

pub(crate) mod edit;
pub(crate) mod encoding;
pub(crate) mod list;
pub(crate) mod read;
pub(crate) mod seam;
pub(crate) mod write;
