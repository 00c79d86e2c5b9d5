"""nbgrader's release step, taught to leave a C stub where a solution sits inside CUDA source."""
import re

from nbgrader.preprocessors import ClearSolutions

C_STUB = "// YOUR CODE HERE"


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
