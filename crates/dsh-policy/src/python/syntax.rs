//! Small readers of the tree-sitter syntax tree the audit walks.

use tree_sitter::Node;

pub(super) fn all_nodes(root: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        out.push(node);
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    out
}

pub(super) fn text(node: Node, src: &[u8]) -> String {
    String::from_utf8_lossy(&src[node.byte_range()]).into_owned()
}

pub(super) fn field_text(node: Node, field: &str, src: &[u8]) -> String {
    node.child_by_field_name(field)
        .map(|n| text(n, src))
        .unwrap_or_default()
}

pub(super) fn is_field(parent: Node, field: &str, child: Node) -> bool {
    parent
        .child_by_field_name(field)
        .is_some_and(|f| f.id() == child.id())
}

pub(super) fn unparen(mut node: Node) -> Node {
    while node.kind() == "parenthesized_expression" {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => break,
        }
    }
    node
}

/// The longest attribute chain the audit follows; a longer one is refused (it keeps the audit
/// linear in the size of the source).
pub(super) const MAX_CHAIN: usize = 64;

/// `a.b.c` as its names, when the chain starts at a plain name; `Err` when it is longer than
/// [`MAX_CHAIN`].
pub(super) fn chain(node: Node, src: &[u8]) -> Result<Option<Vec<String>>, ()> {
    let mut names = Vec::new();
    let mut at = node;
    loop {
        if names.len() > MAX_CHAIN {
            return Err(());
        }
        match at.kind() {
            "identifier" => {
                names.push(text(at, src));
                names.reverse();
                return Ok(Some(names));
            }
            "attribute" => {
                names.push(field_text(at, "attribute", src));
                match at.child_by_field_name("object") {
                    Some(object) => at = unparen(object),
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        }
    }
}

/// The value of a string literal without interpolation or escapes.
pub(super) fn plain_string(node: Node, src: &[u8]) -> Option<String> {
    if node.kind() != "string" {
        return None;
    }
    let mut cursor = node.walk();
    let mut value = String::new();
    for child in node.children(&mut cursor) {
        match child.kind() {
            "string_start" | "string_end" => {}
            "string_content" => {
                let mut c = child.walk();
                if child.named_children(&mut c).next().is_some() {
                    // Escape sequences.
                    return None;
                }
                value.push_str(&text(child, src));
            }
            _ => return None,
        }
    }
    Some(value)
}

pub(super) fn short(s: &str) -> String {
    let one: String = s.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
    if one.chars().count() > 60 {
        format!("{}...", one.chars().take(57).collect::<String>())
    } else {
        one
    }
}

/// The arguments of a call, comments left out.
pub(super) fn arguments<'t>(call: Node<'t>) -> Vec<Node<'t>> {
    call.child_by_field_name("arguments")
        .map(|a| {
            let mut c = a.walk();
            a.named_children(&mut c)
                .filter(|n| n.kind() != "comment")
                .collect()
        })
        .unwrap_or_default()
}

/// The `index`-th positional argument, or the keyword argument `name`; `Err` when a splat
/// (`*args`, `**kw`) could supply it.
pub(super) fn argument<'t>(call: Node<'t>, index: usize, name: &str, src: &[u8]) -> Arg<'t> {
    let args = arguments(call);
    let mut positional = 0;
    for a in &args {
        match a.kind() {
            "keyword_argument" => {
                if field_text(*a, "name", src) == name {
                    return a
                        .child_by_field_name("value")
                        .map_or(Arg::Absent, Arg::Given);
                }
            }
            "dictionary_splat" => return Arg::Splat,
            "list_splat" => {
                if positional <= index {
                    return Arg::Splat;
                }
            }
            _ => {
                if positional == index {
                    return Arg::Given(*a);
                }
                positional += 1;
            }
        }
    }
    Arg::Absent
}

/// One argument of a call.
#[derive(Clone, Copy)]
pub(super) enum Arg<'t> {
    Given(Node<'t>),
    Absent,
    /// A `*args` or `**kw` may supply it.
    Splat,
}

pub(super) fn first_argument(call: Node) -> Option<Node> {
    arguments(call)
        .into_iter()
        .next()
        .filter(|a| is_expression(*a))
}

pub(super) fn is_expression(node: Node) -> bool {
    !matches!(
        node.kind(),
        "keyword_argument" | "list_splat" | "dictionary_splat"
    )
}
