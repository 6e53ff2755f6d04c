"""`dpmstream report`: one self-contained HTML page of where a head node spends its time."""
