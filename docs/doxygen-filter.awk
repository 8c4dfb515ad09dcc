# Doxygen's input filter for the public headers (docs/Doxyfile). The headers keep plain C
# comments (STYLE.md); this turns them into Doxygen's as Doxygen reads them, keeping every line
# where it is:
#  - the opening comment of a header documents the file;
#  - a comment that opens a line documents the declarations after it, up to a blank line, a
#    comment or a preprocessor line (several declarations share it as a member group);
#  - a comment after code on its line documents that code;
#  - section rulers (/* ---- name ---- */) stay plain comments;
#  - a "<" in a comment is escaped, so that <placeholders> do not read as HTML tags.
function opens(s) { return s ~ /^[ \t]*\/\* / && s !~ /^[ \t]*\/\* ----/ }
function stops(s) { return s ~ /^[ \t]*$/ || s ~ /^[ \t]*\/\*/ || s ~ /^[ \t]*#[ \t]*(if|ifdef|ifndef|else|elif|endif|include|undef)/ }
function escape(s) { gsub(/</, "\\<", s); return s }
function trailing(s,    p) {
  p = index(s, "/* ")
  if (p > 1 && substr(s, 1, p - 1) ~ /[^ \t]/) s = substr(s, 1, p - 1) "/**< " substr(s, p + 3)
  return s
}
{ line[NR] = $0 }
END {
  n = NR
  incomment = 0
  for (i = 1; i <= n; i++) {
    out[i] = line[i]
    if (line[i] ~ /\/\*/ || incomment) out[i] = escape(out[i])
    if (line[i] ~ /\/\*/ && line[i] !~ /\*\//) incomment = 1
    else if (line[i] ~ /\*\//) incomment = 0
  }
  i = 1
  while (i <= n) {
    if (!opens(line[i])) {
      out[i] = trailing(out[i])
      i++
      continue
    }
    j = i
    while (j < n && index(line[j], "*/") == 0) j++
    sub(/\/\* /, "/** ", out[i])
    if (i == 1) {
      sub(/\*\/[ \t]*$/, "@file */", out[j])
      i = j + 1
      continue
    }
    # the declarations the comment documents
    k = j + 1
    decls = 0
    body = 0
    while (k <= n && !stops(line[k])) {
      code = line[k]
      p = index(code, "/*")
      if (p > 0) code = substr(code, 1, p - 1)
      if (code ~ /[{}]/) body = 1
      if (code ~ /;[ \t]*$/ || code ~ /^[ \t]*#[ \t]*define/) decls++
      out[k] = trailing(out[k])
      k++
    }
    if (decls >= 2 && !body) {
      out[i] = "/**@{*/ " out[i]
      out[k - 1] = out[k - 1] " /**@}*/"
    }
    i = k
  }
  for (i = 1; i <= n; i++) print out[i]
}
