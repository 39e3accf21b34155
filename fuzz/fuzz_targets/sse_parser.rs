//! Arbitrary bytes, cut into arbitrary chunks, through the SSE reader and both providers'
//! assemblers: never a panic, and the chunking never changes the outcome.

#![no_main]

use std::convert::Infallible;
use std::sync::OnceLock;
use std::time::Duration;

use deerflow::model::http::{assemble, Assembler};
use deerflow::model::providers::anthropic::AnthropicAssembler;
use deerflow::model::providers::openai_chat::OpenAiAssembler;
use deerflow::model::{ModelError, ModelResponse};
use libfuzzer_sys::fuzz_target;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
    })
}

fn parse<A: Assembler>(body: &[u8], cuts: &[usize]) -> Result<ModelResponse, ModelError> {
    let mut pieces: Vec<Result<Vec<u8>, Infallible>> = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
        let cut = cut.clamp(start, body.len());
        pieces.push(Ok(body[start..cut].to_vec()));
        start = cut;
    }
    runtime().block_on(assemble::<A, _, _, _>(
        futures_util::stream::iter(pieces),
        Duration::from_secs(5),
        "fuzz",
    ))
}

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the cut points; the rest is the stream.
    let (head, body) = data.split_at(data.len().min(8));
    let mut cuts: Vec<usize> = head
        .iter()
        .map(|b| (*b as usize * body.len()) / 255)
        .collect();
    cuts.sort_unstable();
    same(
        parse::<OpenAiAssembler>(body, &[]),
        parse::<OpenAiAssembler>(body, &cuts),
    );
    same(
        parse::<AnthropicAssembler>(body, &[]),
        parse::<AnthropicAssembler>(body, &cuts),
    );
});

/// Equal responses, or both errors (an error's text may name a position that depends on
/// where the chunks were cut).
fn same(whole: Result<ModelResponse, ModelError>, cut: Result<ModelResponse, ModelError>) {
    match (&whole, &cut) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => panic!("chunking changed the outcome: {whole:?} vs {cut:?}"),
    }
}
