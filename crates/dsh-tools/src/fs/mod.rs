//! File tools: one file per tool, and the file seam (observed versions) that the reading and
//! changing tools share.

pub(crate) mod edit;
pub(crate) mod list;
pub(crate) mod read;
pub(crate) mod seam;
pub(crate) mod write;
