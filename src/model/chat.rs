//! Chat templates: a user's message wrapped the way an instruct model was trained to see
//! it, by the model's own Jinja template (GGUF `tokenizer.chat_template`, or a Hugging Face
//! folder's `tokenizer_config.json` / `chat_template.jinja`), rendered with minijinja as
//! transformers renders it (`trim_blocks`, `lstrip_blocks`, Python string methods, one user
//! turn, `add_generation_prompt`), then tokenized without the tokenizer's own BOS (the
//! template writes it).

use minijinja::{Environment, ErrorKind, context};

use crate::error::{Error, Result};
use crate::model::tokenizer::ModelTokenizer;

/// Turn-closing tokens of the common templates; those the template uses end a reply.
const END_OF_TURN: [&str; 6] = [
    "<end_of_turn>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|end|>",
    "<|endoftext|>",
    "<|return|>",
];

/// A chat prompt: its text, its tokens, and the tokens that end the model's turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatPrompt {
    pub text: String,
    pub ids: Vec<u32>,
    pub stop: Vec<u32>,
}

/// The prompt of one user turn `message`, with the generation prompt added.
pub fn chat_prompt(tok: &ModelTokenizer, message: &str) -> Result<ChatPrompt> {
    let template = tok
        .chat_template()
        .or_else(|| known_template(tok))
        .ok_or_else(|| {
            Error::usage(
                "--chat needs the model's chat template, and this model has none (GGUF tokenizer.chat_template, or chat_template in tokenizer_config.json) nor the turn tokens of a known one; use --prompt for plain continuation",
            )
        })?;
    let piece = |id: Option<u32>| id.map(|i| tok.piece_text(i)).unwrap_or_default();
    let text = render(
        template,
        message,
        &piece(tok.bos_id()),
        &piece(tok.eos_id()),
    )?;
    let ids = tok.encode_plain(&text)?;
    let mut stop: Vec<u32> = tok.eos_id().into_iter().chain(tok.eot_id()).collect();
    for t in END_OF_TURN {
        if template.contains(t)
            && let Some(id) = tok.inner().token_to_id(t)
            && !stop.contains(&id)
        {
            stop.push(id);
        }
    }
    Ok(ChatPrompt { text, ids, stop })
}

/// Gemma's turn format, for files that carry its turn tokens but no template (as
/// llama.cpp recognises a template by the tokens it uses).
const GEMMA_TURNS: &str = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\n' + (message['content'] | trim) + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";

/// ChatML (`<|im_start|>role ... <|im_end|>`), likewise.
const CHATML_TURNS: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// The turn format a vocabulary's special tokens imply, when the file has no template.
fn known_template(tok: &ModelTokenizer) -> Option<&'static str> {
    let has = |t: &str| tok.inner().token_to_id(t).is_some();
    if has("<start_of_turn>") && has("<end_of_turn>") {
        Some(GEMMA_TURNS)
    } else if has("<|im_start|>") && has("<|im_end|>") {
        Some(CHATML_TURNS)
    } else {
        None
    }
}

/// The template rendered for one user message.
pub fn render(template: &str, message: &str, bos: &str, eos: &str) -> Result<String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<String, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        },
    );
    let bad = |e: minijinja::Error| Error::usage(format!("the model's chat template: {e:#}"));
    env.add_template("chat", template).map_err(bad)?;
    let t = env.get_template("chat").map_err(bad)?;
    let messages = vec![context! { role => "user", content => message }];
    t.render(context! {
        messages => messages,
        add_generation_prompt => true,
        bos_token => bos,
        eos_token => eos,
    })
    .map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gemma 3's template as its GGUF carries it, abridged to the parts one user turn uses.
    const GEMMA: &str = "{{ bos_token }}{%- for message in messages -%}{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}{{ '<start_of_turn>' + role + '\n' + (message['content'] | trim) + '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}";

    const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'].strip() + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    #[test]
    fn templates_render_one_user_turn_and_the_generation_prompt() {
        assert_eq!(
            render(GEMMA, " Hi there ", "<bos>", "<eos>").unwrap(),
            "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"
        );
        assert_eq!(
            render(GEMMA_TURNS, " Hi there ", "<bos>", "<eos>").unwrap(),
            render(GEMMA, " Hi there ", "<bos>", "<eos>").unwrap()
        );
        assert_eq!(
            render(CHATML, "Hi ", "", "").unwrap(),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn a_broken_template_or_raise_exception_is_an_error() {
        let e = render("{% for %}", "x", "", "").unwrap_err().to_string();
        assert!(e.contains("chat template"), "{e}");
        let e = render("{{ raise_exception('only user turns') }}", "x", "", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("only user turns"), "{e}");
    }
}
