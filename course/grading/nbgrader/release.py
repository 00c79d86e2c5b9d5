"""nbgrader's release step, taught to leave a C stub where a solution sits inside CUDA source, and released test
cells that show nothing when their hidden tests are cut; and validate's report, taught not to cut long lines."""
import ast
import re
import textwrap

from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions

C_STUB = "// YOUR CODE HERE"
# What a test cell whose hidden tests were cut ends with, so it does not show its docstring as its value.
HIDDEN_NOTE = "pass  # the hidden tests run here when your notebook is graded"


class ClearCudaSolutions(ClearSolutions):
    """ClearSolutions that replaces a `// BEGIN SOLUTION` region with a C comment, so the source still compiles."""

    def _replace_solution_region(self, cell, language):
        if cell.cell_type != "code" or not any(
                line.lstrip().startswith("//") and self.begin_solution_delimeter in line
                for line in cell.source.split("\n")):
            return super()._replace_solution_region(cell, language)
        new_lines, in_solution, replaced = [], False, False
        for line in cell.source.split("\n"):
            if self.begin_solution_delimeter in line:
                if in_solution:
                    raise RuntimeError("encountered nested begin solution statements")
                in_solution = replaced = True
                indent = re.match(r"\s*", line).group(0)
                stub = C_STUB if line.lstrip().startswith("//") else self.code_stub[language]
                new_lines.extend(indent + s for s in stub.split("\n"))
            elif self.end_solution_delimeter in line:
                in_solution = False
            elif not in_solution:
                new_lines.append(line)
        if in_solution:
            raise RuntimeError("no end solution statement found")
        cell.source = "\n".join(new_lines)
        return replaced


def _ends_with_a_constant(source):
    """True when a cell's last statement is a bare constant (its docstring, say): IPython would show it as Out[]."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    return bool(body) and isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Constant)


class ClearHiddenTestsQuietly(ClearHiddenTests):
    """ClearHiddenTests that ends a test cell left with only its docstring with a `pass`.

    Otherwise the released cell shows its docstring as Out[], and `nbgrader validate` reads that output as the
    cell's score ("cannot be converted to a float"). course.grading.nbgrader.autograde.RestoreHiddenTests cuts the
    source cell the same way, so a released cell still reads as unedited.
    """

    def _remove_hidden_test_region(self, cell):
        removed = super()._remove_hidden_test_region(cell)
        if removed and cell.get("cell_type", "code") == "code" and _ends_with_a_constant(cell.source):
            cell.source = cell.source.rstrip("\n") + "\n" + HIDDEN_NOTE
        return removed


def wrap_validate_lines():
    """`nbgrader validate` prints each line of a failed cell's error cut at Validator.width - 3 columns (87: the
    hint of a check was lost after "..."). Wrap long lines instead, keeping every word; called by nbgrader_config.py."""
    from nbconvert.filters import strip_ansi
    from nbgrader.validator import Validator
    if getattr(Validator._indent, "wraps", False):
        return

    def _indent(self, val):
        width = max(20, self.width - 3 - len(self.indent))
        lines = []
        for line in val.split("\n"):
            line = strip_ansi(line)
            if len(line) <= width:
                lines.append(self.indent + line)
                continue
            lead = re.match(r"\s*", line).group(0)
            lines.extend(self.indent + part for part in textwrap.wrap(
                line, width=width, subsequent_indent=lead + "    ", break_long_words=True, break_on_hyphens=False))
        return "\n".join(lines)
    _indent.wraps = True
    Validator._indent = _indent
