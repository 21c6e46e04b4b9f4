#!/bin/sh
# The tests of csvsum: `sh test.sh` prints one line per case and exits 1 if any fails.
here=$(dirname "$0")
failed=0
check() {
  name="$1"; want="$2"; input="$3"; shift 3
  got=$(printf "$input" | sh "$here/csvsum.sh" "$@" 2>&1)
  if [ "$got" = "$want" ]; then
    echo "ok   $name"
  else
    echo "FAIL $name: want '$want', got '$got'"
    failed=1
  fi
}
check "sums a column" 6 '1,a\n2,b\n3,c\n' 1
check "second column" 9 'x,4\ny,5\n' 2
exit $failed
