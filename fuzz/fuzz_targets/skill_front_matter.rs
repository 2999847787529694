//! A `SKILL.md`'s front matter (dsh-tools' `skill::front_matter::parse`, what a repository's
//! skills are read with): it never panics; what it accepts has a valid name, a description
//! within the limit and a body offset inside the text; what it refuses at a line names a
//! line of the text.
#![no_main]
use dsh_tools::skill::front_matter::{MAX_DESCRIPTION, check_name, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(fm) => {
            assert!(check_name(&fm.name).is_ok(), "accepted name {:?}", fm.name);
            assert!(!fm.description.trim().is_empty());
            assert!(fm.description.chars().count() <= MAX_DESCRIPTION);
            assert!(
                text.is_char_boundary(fm.body_at),
                "the body starts at {} of {} bytes, not a character boundary",
                fm.body_at,
                text.len()
            );
        }
        Err(why) => {
            if let Some(n) = why
                .strip_prefix("line ")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse::<usize>().ok())
            {
                let lines = text.split('\n').count();
                assert!((1..=lines).contains(&n), "line {n} of {lines}: {why}");
            }
        }
    }
});
