// Package secretref resolves secret references inside a configuration value
// tree, as specified in "Configuration: secret references" of the control
// plane specification. It runs once when a configuration is materialized; the
// stored configuration keeps the reference text and only the running process
// holds resolved values.
//
// # Syntax
//
// A reference is written inside any string value, anywhere in the string and
// any number of times, mixed with ordinary text:
//
//	${env:VAR}             environment variable VAR; an error if unset
//	${env:VAR:-default}    VAR, or default when VAR is unset or empty
//	${env:VAR:-}           VAR, or the empty string
//	${file:/path}          the file's content minus trailing "\n" and "\r\n"
//	${secret:NAME}         environment variable SVC_SECRET_NAME; takes :- too
//	$${                    a literal "${"
//
// Strings are scanned once, left to right. The rules at the edges:
//
//   - "$${" always stands for a literal "${", before any scheme or none:
//     "$${env:X}" is the text "${env:X}". In a run of dollars the escape is
//     the last two: "$$${env:X}" is "$${env:X}". Doubling every "${" of a
//     text therefore escapes it exactly.
//   - A reference starts with "${" followed by a known scheme ("env",
//     "file", "secret"; lowercase, case-sensitive) and a colon, and ends at
//     the first "}". Anything else is ordinary text kept verbatim: "${",
//     "${}", "${vault:x}", "${ENV:X}", "${ env:X}". Scanning carries on
//     inside such text, so "${vault:${env:X}}" resolves the inner reference.
//   - A known scheme with no closing "}" later in the string ("${env:X") is
//     not a reference either and stays verbatim.
//   - A complete reference of a known scheme either resolves or fails; it is
//     never left verbatim. It fails when the name is empty ("${env:}",
//     "${env::-x}", "${file:}"; [ErrEmptyName]), when an env or secret name
//     is not [A-Za-z_][A-Za-z0-9_]* ([ErrBadName]), when its text holds "${"
//     (references do not nest; [ErrNested]), when a variable without default
//     is unset ([ErrUnset]), or when the file cannot be read or is larger
//     than [MaxFileSize] ([ErrFile]).
//   - A default ends at the first "}" and so cannot contain one. Only env
//     and secret take defaults: the body of a file reference is the whole
//     path. Relative paths are relative to the working directory.
//   - Resolved values (and defaults) are never rescanned: a variable holding
//     "${env:OTHER}" yields that text.
//   - Map keys and values other than strings are never touched.
//
// # Errors
//
// Every failing reference is reported as an [*Error] naming the path of the
// string (streams[1].pipeline.processors[0].expression), the reference as
// written, and the reason. Error text never holds a resolved value or file
// content. When resolution fails the resolved tree is still returned, with
// the failing references left as written, so callers can go on checking it.
//
// # Values
//
// [Resolver.ResolveValues] also returns what each reference resolved to
// (defaults excluded), for the caller to redact wherever it shows text: a
// reference embedded in a longer string yields its own value, so a message
// quoting only a part of that string is still scrubbed.
// [Resolver.ResolveTainted] also returns the paths of the strings holding
// resolved values, so that a message about one of them can name the path
// and the references rather than quote any part of the string.
//
// This package must not log, keep resolved values, or know the shape of the
// configuration: it sees a generic tree of maps, arrays and scalars.
package secretref
