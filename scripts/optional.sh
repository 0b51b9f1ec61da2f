# Sourced by scripts/bootstrap.sh (needs $PY). absent() lists missing modules; install_optional() installs the
# optional ones that are missing in one pip call that gives up at once where no registry answers. Where none
# answered, the still-missing list is written to $OPTIONAL_MARK (per machine, in /tmp): while it names the same
# packages, later runs on this machine skip pip (warm device calls spent ~12 s in it each time); remove the file to
# try again.
OPTIONAL_MARK=${OPTIONAL_MARK:-/tmp/cudnn_algos_no_registry}

# absent(NAME:PKG ...): the PKGs whose module NAME is not installed (one interpreter, nothing imported)
absent() {
  "$PY" -c 'import importlib.util as u, sys
print(" ".join(a.split(":", 1)[-1] for a in sys.argv[1:] if u.find_spec(a.split(":", 1)[0]) is None))' "$@"
}

# install_optional(NAME:PKG ...): pip install the missing PKGs (quoted words: "dask[distributed]" is no file pattern)
install_optional() {
  local missing names
  missing=$(absent "$@")
  [ -n "$missing" ] || { rm -f "$OPTIONAL_MARK"; return 0; }
  if [ "$(cat "$OPTIONAL_MARK" 2>/dev/null)" = "$missing" ]; then
    echo "bootstrap: not installed: $missing (no registry answered before on this machine: $OPTIONAL_MARK, remove" \
         "it to try again); what needs them skips" >&2
    return 0
  fi
  read -ra names <<< "$missing"
  "$PY" -m pip install -q --retries 0 --timeout 5 "${names[@]}" 2>/dev/null \
    | grep -v "Running pip as the 'root' user" || true
  missing=$(absent "$@")
  if [ -n "$missing" ]; then
    echo "$missing" > "$OPTIONAL_MARK" 2>/dev/null || true
    echo "bootstrap: not installed (no package registry?): $missing; what needs them skips" >&2
  else
    rm -f "$OPTIONAL_MARK"
  fi
}
