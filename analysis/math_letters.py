"""Letters inside LaTeX math read as LaTeX sets them: each letter a variable, a run of them their
product ("$xy + 1$" is x times y plus 1), where the same letters in prose are a word ("so 2 + 3",
"5apples"). The ``number`` extractor reads a run of two letters or more as prose, so this spells each
run inside math as its product ("x \\cdot y") before it reads: "\\boxed{xy + 1}" read 1, another
answer than "\\boxed{x \\cdot y + 1}", as math-verify reads it (x*y + 1)."""

from __future__ import annotations

import re

from .sum_terms import GREEK
from .unit_words import before_more_math, is_unit

# Where math is: a box's argument, "$$...$$", "\\(...\\)", "\\[...\\]", and "$...$" as pandoc reads a
# dollar: no space after the opening one, none before the closing one, no digit after it, one line
# ("it costs $5 and so is $6": money, no math).
_BOXED = re.compile(r"\\boxed\s*\{")
_DELIMITED = re.compile(  # a display's content at most _LONGEST_ARGUMENT long: one unclosed is searched no further
    r"(?<!\\)\$\$(.{1,2000}?)(?<!\\)\$\$|\\\((.{1,2000}?)\\\)|\\\[(.{1,2000}?)\\\]"
    r"|(?<![\\$])\$(?=[^\s$])([^$\n]*?[^\s\\$])\$(?![\d$])",
    re.DOTALL,
)
# What inside math is no letter of a product: text ("\\text{ apples}", "\\operatorname{lcm}"), an
# environment's name, a command's name, a subscript's letters ("a_{ij}").
_TEXT = re.compile(r"\\(?:text[a-z]*|math(?:rm|sf|tt|bf|it|cal|bb|frak)|operatorname\*?|[mh]box|begin|end)\s*\{")
_COMMAND = re.compile(r"\\(?:[a-zA-Z]+|.)")
_SUBSCRIPT = re.compile(r"_[ \t]*(?:\{|[a-zA-Z\d])")
# Letters, spaced or not: a run ("xy", "abcd") or single letters spaced, as LaTeX ignores the space
# ("x y"), is a product; one letter is read as it is, and words spaced ("The answer is 5") are prose
# written without ``\text``, as they were.
_LETTERS = re.compile(r"[a-zA-Z]+(?:[ \t]+[a-zA-Z]+)*(?![a-zA-Z])")
_PRODUCT = re.compile(r"[a-zA-Z]{2,}|[a-zA-Z](?:[ \t]+[a-zA-Z])+")
# A space between a number and a bracket that holds math (an operator, no word) is LaTeX's: the number is its
# factor ("\\boxed{2 (x-1)}" is 2(x-1), "\\boxed{2 (x)}" 2x, as math-verify reads them; they read 1 and 2). Outside math
# such a bracket is a reason given in prose ("we get 12 (3*4)" is 12), and so is a bracket of words in math.
#: A bracket that holds math: an operator and no word, or one letter ("(x-1)", "(3*4)", "(x)"; no "(two)").
MATH_BRACKET = (
    r"(?:\\left\s*)?\((?:(?=[^()]*(?:[-+*/^]|\\cdot(?![a-zA-Z])|\\times(?![a-zA-Z])))"
    r"(?![^()]*(?<![\\a-zA-Z])[a-zA-Z]{2})[^()]*|[ \t]*[a-zA-Z][ \t]*)(?:\\right\s*)?\)"
)
_SPACED_FACTOR = re.compile(r"(?<=\d)[ \t]+(?=" + MATH_BRACKET + ")")
# A space between a bracket and a bracket or a number after it is LaTeX's too: they are one product, as side by side
# ("\\boxed{(2) (3)}" is 6, as "(2)(3)" is; it read 3, the last number). A bracket with a comma is a tuple's, left alone.
_SPACED_BRACKETS = re.compile(r"(\((?:[^(),]|\\right)*\))[ \t]+(?=(?:\\left\s*)?\(|\d)")
_BEFORE_BRACKET = re.compile(r"[ \t]+(?=\(|\\left(?![a-zA-Z]))")  # a letter's space before its bracket
# A letter's space before a factor's command ("x \\pi", "x \\sqrt{2}", "x \\alpha"): LaTeX's, the product's (the
# letter was lost: "\\boxed{x \\pi}" read \\pi, one answer with "\\boxed{\\pi}").
_BEFORE_COMMAND = re.compile(
    r"[ \t]+(?=\\(?:pi|sqrt|[dt]?frac|" + "|".join(sorted(GREEK, key=len, reverse=True)) + r")(?![a-zA-Z]))"
)
# Commands whose space after a number is LaTeX's, the number their factor ("5 \\alpha", "5 \\pi x", "5 \\sqrt{2}x":
# the letters after them were lost, "5 \\pi x" read 5\\pi, one answer with "5\\pi").
_FACTOR_COMMANDS = GREEK | {"pi", "sqrt", "frac", "dfrac", "tfrac"}
_AHEAD = re.compile(r"[\\_a-zA-Z]")  # where a command, a subscript or letters may begin
# Math that ends inside a divisor: a "/" and the factors after it so far (numbers, letters, commands of no product sign).
_IN_DIVISOR = re.compile(r"/(?:[ \t]*(?:\d+(?:\.\d+)?|\\(?!cdot(?![a-zA-Z])|times(?![a-zA-Z]))[a-zA-Z]+|[a-zA-Z]))*[ \t]*\Z")
_LONGEST_ARGUMENT = 2000  # characters searched for a brace that closes


#: What marks math in a text: a known answer with none of them is LaTeX written bare.
DELIMITERS = ("$", "\\(", "\\[", "\\boxed")


def as_math(reference: str) -> str:
    """A known answer written bare ("xy + 1", as MATH's are) between ``$``, as lighteval writes them
    and ``--extract math`` reads them: its letters are variables, as an answer's in a box are (bare,
    "xy + 1" read 1). One already delimited is as written."""
    return reference if any(d in reference for d in DELIMITERS) else f"${reference.strip()}$"


def last_math(text: str) -> str | None:
    """What the text's last ``$...$``, ``$$...$$``, ``\\(...\\)`` or ``\\[...\\]`` holds; None where it has none."""
    last = next(reversed(list(_DELIMITED.finditer(text))), None)
    return next(g for g in last.groups() if g is not None) if last else None


def multiplied(text: str) -> str:
    """The text with each run of letters inside math spelled as their product ("\\boxed{xy + 1}" as
    "\\boxed{x \\cdot y + 1}", "$2abcd$" as "$2a \\cdot b \\cdot c \\cdot d$", "$x y$" as
    "$x \\cdot y$", "$5 xy$" as "$5x \\cdot y$", "$2 (x-1)$" as "$2(x-1)$"); text outside math, a unit after a number and a space
    (``unit_words``: "$5 km$"), and text commands' words as they are."""
    out, at = [], 0
    for start, end in _spans(text):
        out += [text[at:start], _products(text[start:end])]
        at = end
    return "".join(out) + text[at:]


def _spans(text: str) -> list[tuple[int, int]]:
    """Where math is in the text, as (start, end) of what its delimiters hold, merged where they overlap."""
    pairs = _pairs(text)
    found = [(m.end(), _closing(text, m.end(), pairs)) for m in _BOXED.finditer(text)]
    for m in _DELIMITED.finditer(text):
        group = next(g for g in range(1, 5) if m.group(g) is not None)
        found.append((m.start(group), m.end(group)))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _pairs(text: str) -> dict[int, int]:
    """Where the brace that closes each opening one is, found in one pass: searched from each box
    instead, 2,000 characters each, a text of many unclosed boxes took seconds."""
    pairs, opened = {}, []
    for m in re.finditer(r"[{}]", text):
        if m.group() == "{":
            opened.append(m.start())
        elif opened:
            pairs[opened.pop()] = m.start()
    return pairs


def _closing(text: str, start: int, pairs: dict[int, int]) -> int:
    """Where the brace that closes the one before ``start`` is (``pairs``); the end of what is searched
    (``_LONGEST_ARGUMENT``) where none is that near."""
    close = pairs.get(start - 1)
    return close if close is not None and close < start + _LONGEST_ARGUMENT else min(len(text), start + _LONGEST_ARGUMENT)


def _products(math: str) -> str:
    """Math's runs of letters as products, what is no variable skipped (``_TEXT``, ``_COMMAND``, ``_SUBSCRIPT``)."""
    math = _SPACED_BRACKETS.sub(
        r"\1", _SPACED_FACTOR.sub("", math)
    )  # before its letters are products: "(two)" is no bracket of math
    out, at, pairs = [], 0, _pairs(math)
    while (found := _AHEAD.search(math, at)) is not None:
        out.append(math[at : found.start()])
        at = found.start()
        if skipped := _TEXT.match(math, at) or _SUBSCRIPT.match(math, at):
            end = _closing(math, skipped.end(), pairs) + 1 if skipped.group().endswith("{") else skipped.end()
        elif command := _COMMAND.match(math, at):
            end = command.end()
            if command.group()[1:] in _FACTOR_COMMANDS and _after_number(math, at):  # "5 \\pi x" as "5\\pi x"
                out[-1] = out[-1].rstrip(" \t")
        elif (letters := _LETTERS.match(math, at)) is None:  # a "_" of no subscript ("__", "_}")
            end = at + 1
        else:
            end = letters.end()
            spaced = _after_number(math, at)
            unit = spaced and is_unit(letters.group()) and not before_more_math(math, end)  # "5 m \\pi" is 5πm
            unit = unit and not (math.startswith("^", end) and _after_power(math, at))  # "\\pi^2 cm^2" is 2π²cm²
            if is_unit(letters.group()) and _END.match(math, end) and _after_value(math, at):  # "5\\pi m" is 5π
                out[-1] = out[-1].rstrip(" \t")
                at = end
                continue
            if _PRODUCT.fullmatch(letters.group()) and not unit:
                if spaced:  # "5 xy" as "5xy": no unit, the number's factor
                    out[-1] = out[-1].rstrip(" \t")
                product = " \\cdot ".join(re.sub(r"[ \t]", "", letters.group()))
                # in a divisor ("1/xy" is 1/(xy), as math-verify reads it) the product is one factor: "1/x \\cdot y" is y/x
                out.append("{" + product + "}" if _IN_DIVISOR.search("".join(out)) else product)
                at = gap.end() if (gap := _BEFORE_COMMAND.match(math, end)) else end  # "5 xy \\pi" read \\pi
                continue
            if len(letters.group()) == 1 and spaced and not unit:
                out[-1] = out[-1].rstrip(" \t")  # "5 x" as "5x": a letter of no unit is the number's factor
            if len(letters.group()) == 1 and (gap := _BEFORE_BRACKET.match(math, end) or _BEFORE_COMMAND.match(math, end)):
                end = gap.end()  # "y (x+1)" as "y(x+1)": the space is LaTeX's (y was lost, "x+1" read)
                out.append(letters.group())
                at = end
                continue
        out.append(math[at:end])
        at = end
    return "".join(out) + math[at:]


# What may come before a unit at the end of math for it to be the unit of a value: numbers, operators and the
# commands of constants, no letter of a variable ("5\\pi m" is 5π, "\\sqrt{2} cm" √2, as math-verify strips them).
# A constant's power ends it too, its exponent braced or not ("\\pi^2 m" is π², as "\\pi^{2} m" was; it was π²m), and so
# does a number's power of e, math-verify's exp ("e^2 m" is e², as math-verify reads it; it was e²m), and a bracket of
# constants, with its power or not ("(1+\\pi)^2 m" is (1+π)²; it was m(1+π)²).
_E_POWER = r"(?<![a-zA-Z\\])e\^(?:\d+|\{-?\d+\})"
_VALUE_BEFORE = re.compile(
    r"(?:[\d.,+\-*/^{}()\[\] \t]|\\(?:pi|sqrt|[dt]?frac|cdot|times|left|right)(?![a-zA-Z])|" + _E_POWER + r")*"
)
_CONSTANT_END = re.compile(r"(?:(?:\\pi|[})])(?:\^\d+)?|" + _E_POWER + r")[ \t]*\Z")
_END = re.compile(r"\s*\Z")


def _after_value(math: str, at: int) -> bool:
    """Whether the letters at ``at`` follow an expression of constants ending in ``\\pi``, a brace (``\\sqrt{2}``,
    ``\\frac{1}{2}``) or a bracket, or a power of one (``\\pi^2``, ``e^2``, ``(1+\\pi)^2``): there a unit at the end is
    the value's, as after a number. After a variable they are a product's factors: "2\\pi r h" is 2πrh, where
    math-verify strips "h" as hours and reads 2πr, another answer."""
    return _CONSTANT_END.search(math, 0, at) is not None and _VALUE_BEFORE.fullmatch(math, 0, at) is not None


# The exponent of a power of no number, at the end ("\\pi^2", "x^2", "(1+x)^2"; no "10^3").
_POWER_OF_NO_NUMBER = re.compile(r"(?<![\d\s])\^\d+[ \t]*\Z")


def _after_power(math: str, at: int) -> bool:
    """Whether the letters at ``at`` follow the power of no number and a space: there a unit's power makes it a
    product's factors ("\\pi^2 cm^2" is π²cm², as "\\pi^{2} cm^2" and "\\pi^2 m^2" were, and as math-verify reads them;
    "cm" was taken for the unit of π², so that it read π², another answer); "10^3 m" is still 1000 m."""
    return _POWER_OF_NO_NUMBER.search(math, 0, at) is not None


def _after_number(math: str, at: int) -> bool:
    """Whether the letters at ``at`` follow a number and a space: its unit where they are one's ("$5 km$",
    "\\boxed{10 mins}", as outside math), else its factors ("\\boxed{5 xy}", as math-verify reads it)."""
    begin = at
    while begin and math[begin - 1] in " \t":
        begin -= 1
    return begin < at and math[begin - 1 : begin].isdigit()
