#!/usr/bin/env bash
# Runs every forward stage with two builds of the `mhc` tool on the same seeded inputs on one
# device and requires identical bits (`mhc compare --tol 0`): the check that a change which must
# not alter any result (a refactor, a new selector) did not. The shapes cover every kernel family
# of the sm_90a plan (few-token, persistent-cluster with and without TMA, GEMM, general, the
# tensor-core post and static kernels, the cluster head kernels) in both dtypes and, where the
# stage has them, both formulations and the optional inputs.
#
#   bash tools/compare-builds.sh OLD_MHC NEW_MHC [DEVICE] [WORKDIR]
#
# COMPARE_CASES="stage:T:n:C[:flags] ..." runs those cases instead of the list below.
#
# Prints one line per case and a summary (a case that differs also says which build, if either,
# is within the dtype's tolerance of the f64 reference); exits 1 if any case differs or fails in
# one build only.
set -uo pipefail
old="$1"; new="$2"; dev="${3:-cuda}"; work="${4:-$(mktemp -d)}"
mkdir -p "$work"

# stage:T:n:C[:gamma flags]
cases=(
    pre:1:4:4096 pre:8:4:4096 pre:16:4:4096 pre:64:4:4096 pre:100:4:4096 pre:3000:4:4096
    pre:100:4:1280 pre:16:4:256 pre:1000:4:7168 pre:17:1:64 pre:100:8:1280 pre:16:32:1280
    pre:600:32:1280 pre:2100:16:1280 pre:100:4:4096:--gamma-k pre:100:4:4096:--gamma-f
    pre:8:4:4096:--gamma-k pre:1000:4:1280:--gamma-k:--gamma-f
    post:1:4:4096 post:64:4:4096 post:1000:4:4096 post:16:32:1280 post:600:32:1280 post:500:16:1280
    post_pre:16:4:4096 post_pre:100:4:4096 post_pre:500:4:4096 post_pre:1000:4:7168 post_pre:600:32:1280
    post_pre:100:4:4096:--gamma-f
    head:1:4:4096 head:100:4:4096 head:1000:4:4096 head:1000:4:7168 head:16:32:1280 head:100:8:1280
    static:320:4:1280 static:2560:4:1280 static:64:32:1280 static:128:8:1280 static:100:4:6000
    expand:100:4:4096 expand:17:3:64
)
[ -n "${COMPARE_CASES:-}" ] && read -ra cases <<<"$COMPARE_CASES"
pass=0; fail=0
for spec in "${cases[@]}"; do
    IFS=: read -r stage t n c g1 g2 <<<"$spec"
    gamma=(); [ -n "${g1:-}" ] && gamma+=("$g1"); [ -n "${g2:-}" ] && gamma+=("$g2")
    in="$work/$(echo "$spec" | tr ':' '_' | tr -d '-')"
    "$new" example "$stage" --out "$in/in" --tokens "$t" --n "$n" --c "$c" "${gamma[@]}" >/dev/null || { echo "FAIL $spec: example"; fail=$((fail+1)); continue; }
    forms=(v4 paper); case "$stage" in head|static|expand) forms=(v4) ;; esac
    for dtype in bf16 f32; do
        for form in "${forms[@]}"; do
            extra=(); [ "$stage" = expand ] && extra=(--n "$n")
            a="$in/old-$dtype-$form"; b="$in/new-$dtype-$form"
            ra=$("$old" run "$stage" --in "$in/in" --out "$a" --device "$dev" --dtype "$dtype" --formulation "$form" "${extra[@]}" 2>&1); sa=$?
            rb=$("$new" run "$stage" --in "$in/in" --out "$b" --device "$dev" --dtype "$dtype" --formulation "$form" "${extra[@]}" 2>&1); sb=$?
            if [ $sa -ne 0 ] || [ $sb -ne 0 ]; then
                if [ $sa -ne 0 ] && [ $sb -ne 0 ]; then
                    echo "both refuse $spec $dtype $form: $(echo "$rb" | head -1)"; pass=$((pass+1))
                else
                    echo "FAIL $spec $dtype $form: old rc $sa, new rc $sb: $(echo "$ra$rb" | head -2 | tr '\n' ' ')"; fail=$((fail+1))
                fi
                continue
            fi
            # Both directions, so that an output missing from either build counts.
            out=""
            if out=$("$new" compare "$b" "$a" --tol 0 2>&1) && out=$("$new" compare "$a" "$b" --tol 0 2>&1); then
                echo "identical $spec $dtype $form"; pass=$((pass+1))
            else
                # The outputs that differ (or are missing) and the summary line, kept with the inputs,
                # and which build (if either) is within the dtype's tolerance of the f64 reference.
                ref="$in/ref-$form"; tol=1e-4; [ "$dtype" = bf16 ] && tol=2e-2
                [ -d "$ref" ] || "$new" run "$stage" --in "$in/in" --out "$ref" --device cpu --dtype f64 --formulation "$form" "${extra[@]}" >/dev/null 2>&1
                verdict=""
                for side in old new; do
                    d="$in/$side-$dtype-$form"
                    if "$new" compare "$d" "$ref" --tol "$tol" >/dev/null 2>&1; then verdict+="$side matches the f64 reference; "
                    else verdict+="$side does NOT match the f64 reference; "; fi
                done
                echo "FAIL $spec $dtype $form: $(echo "$out" | grep -E 'FAIL|missing|^mhc:' | tr '\n' ' ') ($verdict""inputs and both outputs in $in)"
                fail=$((fail+1))
            fi
        done
    done
done
echo "compare-builds: $pass cases identical (or refused by both), $fail differ"
[ "$fail" -eq 0 ]
