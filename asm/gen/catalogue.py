"""The generated rows of asm/catalogue.toml.

Each generated family owns one marked section of the catalogue:

    # BEGIN generated: <name> (<what>; python3 -m asm.gen)
    [[variant]] ...
    # END generated: <name>

Everything outside the markers is hand-written and left alone. A row's `expect = {...}` line is
written by `mhc asm --update-catalogue` from the assembled image, not by the generators: a
regenerated row carries the line the catalogue already holds for its id (a new id gets a zero
placeholder for `mhc asm --update-catalogue` to fill), so the check compares everything else.
"""

import re

PLACEHOLDER_EXPECT = 'expect = { registers = 0, shared_bytes = 0, local_bytes = 0, kernarg_bytes = 0, sha256 = "" }'


def _list(items, quote=True):
    return "[" + ", ".join(f'"{x}"' if quote else str(x) for x in items) + "]"


ANY_C = (8, 8, 1048576)  # the C a row takes when nothing narrows it: multiples of 8 up to 2^20
GRID_DEPENDENCY = "grid_dependency"  # the trait of kernels that wait on the previous launch's writes


def sm90_rows():
    """(rows, entry): a list of sm_90a [[variant]] tables and the function that appends one to it.
    entry takes row's fields in row's order with the code object named by its stem in asm/bin/sm90
    (`file`), C defaulting to ANY_C and `xp` (x_passes) written only when x is read more than once."""
    rows = []

    def entry(id_, stage, forms, file, entry_, dtypes, ns, tokens, tile, threads, why, launch, geom, c=ANY_C,
              prefer=None, cap=None, params=None, xp=1, wave_us=None):
        rows.append(row(id_, stage, forms, "sm_90a", f"asm/bin/sm90/{file}.cubin", entry_, dtypes, ns, c,
                        tokens, tile, threads, why, launch, prefer_tokens=prefer, register_cap=cap,
                        x_passes=xp if xp != 1 else None, wave_us=wave_us, params=params, geometry=geom))

    return rows, entry


def geometry(channels_per_thread=None, threads_per_item=None, cluster=None, dynamic_shared_max=None,
             row_pad=None, traits=None, companions=None):
    """The `geometry = {...}` value: what the launcher reads (keys in the catalogue's order)."""
    parts = []
    for key, value in [("channels_per_thread", channels_per_thread), ("threads_per_item", threads_per_item),
                       ("cluster", cluster), ("dynamic_shared_max", dynamic_shared_max), ("row_pad", row_pad)]:
        if value is not None:
            parts.append(f"{key} = {value}")
    if traits is not None:
        parts.append(f"traits = {_list(traits)}")
    if companions is not None:
        parts.append(f"companions = {_list(companions)}")
    return "{ " + ", ".join(parts) + " }"


def row(id, stage, formulations, arch, file, entry, dtypes, n, c, tokens, tile, threads, why, launch,
        prefer_tokens=None, register_cap=None, x_passes=None, wave_us=None, params=None, rank=None,
        options=None, geometry=None, comment=()):
    """One [[variant]] table without its expect line. c: (multiple_of, min, max); tokens,
    prefer_tokens: (min, max); tile: tokens per block or (tokens, split); comment: lines of the
    comment above it."""
    lines = [f"# {line}" for line in comment] + [
        "[[variant]]",
        f'id = "{id}"',
        f'stage = "{stage}"',
        f"formulations = {_list(formulations)}",
        f'arch = "{arch}"',
        f'file = "{file}"',
        f'entry = "{entry}"',
        f"dtypes = {_list(dtypes)}",
        f"n = {_list(n, quote=False)}",
        f"c = {{ multiple_of = {c[0]}, min = {c[1]}, max = {c[2]} }}",
        f"tokens = {{ min = {tokens[0]}, max = {tokens[1]} }}",
    ]
    if prefer_tokens is not None:
        lines.append(f"prefer_tokens = {{ min = {prefer_tokens[0]}, max = {prefer_tokens[1]} }}")
    if isinstance(tile, tuple):
        lines.append(f"tile = {{ tokens = {tile[0]}, split = {tile[1]} }}")
    else:
        lines.append(f"tile = {{ tokens = {tile} }}")
    lines.append(f"threads = {threads}")
    for key, value in [("register_cap", register_cap), ("x_passes", x_passes), ("wave_us", wave_us)]:
        if value is not None:
            lines.append(f"{key} = {value}")
    if params is not None:
        lines.append(f'params = "{params}"')
    lines.append(f'launch = "{launch}"')
    if rank is not None:
        lines.append(f"rank = {rank}")
    if options is not None:
        lines.append(f"options = {_list(options)}")
    if geometry is not None:
        lines.append(f"geometry = {geometry}")
    lines.append(f'why = "{why}"')
    return {"id": id, "lines": lines}


def expect_lines(text):
    """id -> the expect line of every row of a catalogue text."""
    out, current = {}, None
    for line in text.splitlines():
        m = re.match(r'id = "([a-z0-9_]+)"$', line)
        if m:
            current = m.group(1)
        elif line.startswith("expect = ") and current is not None:
            out[current] = line
    return out


def section(name, what, rows, expects, comment=()):
    """The marked section text: its BEGIN line, comment lines, the rows (each with the expect
    line carried over), its END line."""
    out = [f"# BEGIN generated: {name} ({what}; python3 -m asm.gen)"]
    out += [f"# {c}" if c else "#" for c in comment]
    for r in rows:
        out.append("")
        out += r["lines"]
        out.append(expects.get(r["id"], PLACEHOLDER_EXPECT))
    out.append(f"# END generated: {name}")
    return "\n".join(out) + "\n"


def splice(text, name, body):
    """text with the marked section `name` replaced by body (a section() text)."""
    begin = re.search(rf"^# BEGIN generated: {re.escape(name)} \(.*\n", text, re.M)
    end_marker = f"# END generated: {name}\n"
    if begin is None or end_marker not in text:
        raise SystemExit(f"asm/catalogue.toml: no section `{name}` (BEGIN / END generated markers)")
    end = text.index(end_marker, begin.start()) + len(end_marker)
    return text[:begin.start()] + body + text[end:]


def generate(text, sections):
    """The catalogue text with every generated section rewritten. sections: [(name, what,
    comment lines, rows)]."""
    expects = expect_lines(text)
    for name, what, comment, rows in sections:
        text = splice(text, name, section(name, what, rows, expects, comment))
    return text
