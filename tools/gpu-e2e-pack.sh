#!/usr/bin/env bash
# Adds an end-to-end check of `mhc run --device cuda` to gpu-pack/ (run tools/gpu-pack.sh first):
# seeded inputs for every forward stage at a few shapes (`mhc example`), the cpu reference's
# outputs for both formulations, and gpu-pack/e2e.sh, which runs each case on the GPU in f32 and
# bf16 storage and compares (`mhc compare`; f32 2e-5, bf16 1e-2 relative). Inputs are f64 .npy,
# so shapes stay small enough for the device tool's 64 MiB transfer limit.
set -euo pipefail
cd "$(dirname "$0")/.."
mhc="gpu-pack/mhc"
[ -x "$mhc" ] || { echo "run tools/gpu-pack.sh first" >&2; exit 1; }
e2e=gpu-pack/e2e
rm -rf "$e2e"
add() { # stage T n C
    local d="$e2e/$1-$2-$3-$4" extra=()
    [ "$1" = expand ] && extra=(--n "$3")
    "$mhc" example "$1" --out "$d/in" --tokens "$2" --n "$3" --c "$4" --seed 11 >/dev/null
    "$mhc" run "$1" --in "$d/in" --out "$d/cpu" --dtype f32 "${extra[@]}" >/dev/null
    "$mhc" run "$1" --in "$d/in" --out "$d/cpu-paper" --dtype f32 --formulation paper "${extra[@]}" >/dev/null
}
for st in pre post post_pre head static expand; do add "$st" 17 4 1280; add "$st" 3 8 256; done
for st in post head static expand; do add "$st" 2 32 64; done
# static on tensor cores: 2-CTA clusters (T = 40, n = 32) and one CTA per token (T = 70, n = 16)
add static 40 32 128; add static 70 16 64
for st in pre post_pre; do add "$st" 2 4 4096; done
# pre on the GEMM kernel (n = 32 from 33 tokens; C = 8 keeps the .npy inputs small, h_res is 8 MB)
add pre 1024 32 8
# post_pre on the fused persistent-cluster kernel (bf16, n = 4, C % 128 == 0, T >= 65)
add post_pre 100 4 1280
add pre 80 4 4096       # the cluster kernel's TMA entry (C % 1024 == 0; T > 64: past the mid kernel)
# post on tensor cores (bf16, n = 32 from T = 65)
add post 70 32 64
# post on tensor cores at n = 16 (from T = 400)
add post 400 16 64
cat > gpu-pack/e2e.sh <<'RUN'
#!/usr/bin/env bash
# mhc run --device cuda on every e2e case, both formulations, f32 and bf16, vs the cpu reference.
cd "$(dirname "$0")"
fail=0
for d in e2e/*/; do
  st=$(basename "$d" | cut -d- -f1); n=$(basename "$d" | cut -d- -f3)
  extra=""; [ "$st" = expand ] && extra="--n $n"
  for form in v4 paper; do
    ref="$d/cpu"; [ $form = paper ] && ref="$d/cpu-paper"
    for dt in f32 bf16; do
      tol=2e-5; [ $dt = bf16 ] && tol=1e-2
      out=$(mktemp -d)
      if ! ./mhc run "$st" --in "$d/in" --out "$out/o" --device cuda --dtype $dt --formulation $form $extra >/dev/null 2>"$out/err"; then
        echo "RUNFAIL $d $form $dt: $(cat "$out/err")"; fail=1
      elif ./mhc compare "$out/o" "$ref" --tol $tol >"$out/cmp" 2>&1; then
        echo "ok   $d $form $dt $(sort -k2 -g "$out/cmp" | tail -1 | awk '{print $1, $2}')"
      else
        echo "FAIL $d $form $dt"; cat "$out/cmp"; fail=1
      fi
      rm -rf "$out"
    done
  done
done
exit $fail
RUN
chmod +x gpu-pack/e2e.sh
du -sh gpu-pack
