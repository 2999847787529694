//! The Anthropic (messages) stream decoder: SSE framing, chunks,
//! tool-call deltas, usage, finish reasons, and errors the server reports in the stream.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| dsh_fuzz::stream(dsh_model::fuzzing::Format::Anthropic, data));
