//! File tools: one file per tool, the file seam (observed versions) that the reading and
//! changing tools share with its lock across processes and its temporary files (their names,
//! and the sweep that removes those a killed write left behind), the text encodings they
//! all read and write back alike, and the diff a change previews.

pub(crate) mod dir_lock;
pub(crate) mod edit;
pub(crate) mod encoding;
pub(crate) mod list;
pub(crate) mod parent_dir;
pub(crate) mod pre_images;
pub(crate) mod preview;
pub(crate) mod read;
pub(crate) mod restore;
pub(crate) mod seam;
pub(crate) mod sweep;
pub(crate) mod temp_name;
pub(crate) mod write;
