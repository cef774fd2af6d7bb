"""The bundle's entry script: everything it starts goes through spacrq.frozen's dispatcher."""
from spacrq.frozen import main

if __name__ == "__main__":
    main()
