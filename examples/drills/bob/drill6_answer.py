With blocking the error is at the launch. Without it there was no error, so blocking is needed to see errors.
