#!/bin/sh
# Builds libsdpshim.so: build.sh OUTPUT [extra gcc flags...]
# The one place that knows how; preload/c/Makefile.inc and preload/ctest use it.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
exec ${CC:-gcc} -std=gnu11 -O2 -g -fPIC -Wall -Wextra -Werror=implicit-function-declaration \
	-fvisibility=hidden -fno-semantic-interposition -U_FORTIFY_SOURCE -D_GNU_SOURCE \
	"$@" -shared -o "$out" \
	"$dir"/*.c "$dir"/*.S \
	-Wl,--version-script="$dir"/libsdpshim.map -Wl,-z,now -Wl,-z,relro -Wl,-z,noexecstack \
	-Wl,--no-undefined -ldl
