//! The one Go text/template form the slow-log configuration takes: `{{ .Path }}`.
//!
//! MOCO renders `spec.slowQueryLogConfigTmpl` with Go's text/template and a single field,
//! `.Path`. A Go template engine is not worth carrying for one field, so this expands `.Path`
//! actions (with Go's `{{-`/`-}}` whitespace trimming) and refuses any other action by name,
//! instead of writing a configuration fluent-bit would misread.

use super::RenderError;

const FIELD: &str = "spec.slowQueryLogConfigTmpl";

/// `template` with every `{{ .Path }}` replaced by `path`.
pub fn expand_path(template: &str, path: &str) -> Result<String, RenderError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after_open = &rest[start + 2..];
        let Some(end) = after_open.find("}}") else {
            return Err(RenderError::invalid(
                FIELD,
                "unclosed action: \"{{\" without \"}}\"",
            ));
        };
        let mut action = &after_open[..end];
        let mut text = &rest[..start];
        // Go: "{{- " trims the whitespace before the action, " -}}" the whitespace after it.
        if let Some(a) = action.strip_prefix("- ") {
            action = a;
            text = text.trim_end();
        }
        let trim_after = if let Some(a) = action.strip_suffix(" -") {
            action = a;
            true
        } else {
            false
        };
        out.push_str(text);
        match action.trim() {
            ".Path" => out.push_str(path),
            other => {
                return Err(RenderError::invalid(
                    FIELD,
                    format!(
                        "unsupported template action {{{{{other}}}}}: only {{{{ .Path }}}} is expanded"
                    ),
                ));
            }
        }
        rest = &after_open[end + 2..];
        if trim_after {
            rest = rest.trim_start();
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_path_with_go_trimming_and_refuses_other_actions() {
        let p = "/var/log/mysql/mysql.slow";
        assert_eq!(
            expand_path("Path {{ .Path }}\n", p).unwrap(),
            format!("Path {p}\n")
        );
        assert_eq!(expand_path("a{{.Path}}b", p).unwrap(), format!("a{p}b"));
        assert_eq!(
            expand_path("x  \n{{- .Path -}}\n  y", p).unwrap(),
            format!("x{p}y")
        );
        assert_eq!(expand_path("no actions", p).unwrap(), "no actions");
        let e = expand_path("{{ .Other }}", p).unwrap_err().to_string();
        assert!(
            e.starts_with("spec.slowQueryLogConfigTmpl: unsupported template action {{.Other}}"),
            "{e}"
        );
        let e = expand_path("{{ .Path ", p).unwrap_err().to_string();
        assert!(e.contains("unclosed action"), "{e}");
    }
}
